"""CompiledModel.storage_owners: alias chains resolve to their root, groups to their first member."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from onyxia.core import BufferRef, CompiledModel, DataType, PlanningError, PlanTensor, TensorRole


def _model(aliases: dict[int, int], groups: Sequence[tuple[BufferRef, ...]] = ()) -> CompiledModel:
    tensors = {i: PlanTensor(i, f"t{i}", DataType.FLOAT, (4,), TensorRole.INTERMEDIATE) for i in range(6)}
    return CompiledModel([], [], tensors, [], [], [], aliases=aliases, buffer_groups=list(groups))


def _t(i: int) -> BufferRef:
    return BufferRef(tensor=i)


def test_a_view_of_a_view_resolves_to_the_root() -> None:
    assert _model({2: 1, 1: 0}).storage_owners() == {_t(2): _t(0), _t(1): _t(0)}


def test_group_members_and_their_views_use_the_first_member() -> None:
    model = _model({4: 3}, [(_t(0), _t(3), BufferRef(scratch=1))])
    assert model.storage_owners() == {_t(4): _t(0), _t(3): _t(0), BufferRef(scratch=1): _t(0)}
    assert model.storage_owners(groups=False) == {_t(4): _t(3)}


def test_alias_cycles_and_aliased_group_members_are_refused() -> None:
    with pytest.raises(PlanningError, match=r"cycle through \['t1', 't2'\]"):
        _model({1: 2, 2: 1}).storage_owners()
    with pytest.raises(PlanningError, match="not a storage root"):
        _model({4: 3}, [(_t(0), _t(4))]).storage_owners()
