"""`ComputePassBatchingPass` on hand-built plans: copies cluster, storage dependencies hold (through
views too), symbolic bindings follow their operations, and a plan with nothing to gain is unchanged."""

from __future__ import annotations

import random

import pytest

from onyxia.compiler.passes import ComputePassBatchingPass
from onyxia.compiler.passes.compute_pass_batching import count_segments
from onyxia.core.plan import (
    BindingDesc,
    BufferRef,
    CompiledModel,
    CopyBuffer,
    Dispatch,
    ImmediateField,
    PlannedOp,
    SymbolicBinding,
)


def _t(tensor: int) -> BufferRef:
    return BufferRef(tensor=tensor)


def _dispatch(name: str, reads: list[int], writes: list[int]) -> PlannedOp:
    bindings = [BindingDesc(i, _t(t), True) for i, t in enumerate(reads)]
    bindings += [BindingDesc(len(reads) + i, _t(t), False) for i, t in enumerate(writes)]
    return PlannedOp(name, "Custom", [Dispatch(0, bindings, (1, 1, 1))])


def _copy(name: str, src: int, dst: int) -> PlannedOp:
    return PlannedOp(name, "Reshape", [CopyBuffer(_t(src), _t(dst), 16)])


def _plan(*ops: PlannedOp, aliases: dict[int, int] | None = None) -> CompiledModel:
    return CompiledModel(list(ops), [], {}, [], [], [], aliases=aliases or {})


def _names(plan: CompiledModel) -> list[str]:
    return [op.name for op in plan.operations]


def test_copies_wait_for_independent_dispatches_and_leave_together() -> None:
    """A decoder's q and k projections, each reshaped by a copy, then attention reading both."""
    plan = _plan(
        _dispatch("mm_q", [0], [1]),
        _copy("reshape_q", 1, 2),
        _dispatch("mm_k", [0], [3]),
        _copy("reshape_k", 3, 4),
        _dispatch("attention", [2, 4], [5]),
    )
    assert count_segments(plan) == 5  # pass, copy, pass, copy, pass
    assert ComputePassBatchingPass().run(plan)
    assert _names(plan) == ["mm_q", "mm_k", "reshape_q", "reshape_k", "attention"]
    assert count_segments(plan) == 4  # pass, copy, copy, pass


def test_a_copy_never_overtakes_a_reader_of_what_it_overwrites() -> None:
    plan = _plan(
        _copy("fill_a", 9, 0),
        _dispatch("read_a", [0], [1]),
        _copy("refill_a", 8, 0),  # after read_a (write after read) and fill_a (write after write)
        _dispatch("read_a_again", [0], [2]),
    )
    assert not ComputePassBatchingPass().run(plan)
    assert _names(plan) == ["fill_a", "read_a", "refill_a", "read_a_again"]


def test_dependencies_go_through_views() -> None:
    """`view` (tensor 3) lives in `t`'s buffer (tensor 2): copying the view must wait for t's writer,
    although the copy-after-copy preference would otherwise pull it first."""
    plan = _plan(
        _copy("first_copy", 0, 1),
        _dispatch("write_t", [0], [2]),
        _copy("copy_view", 3, 4),
        aliases={3: 2},
    )
    assert not ComputePassBatchingPass().run(plan)
    assert _names(plan) == ["first_copy", "write_t", "copy_view"]


def test_symbolic_bindings_follow_their_operations() -> None:
    plan = _plan(
        _dispatch("mm_q", [0], [1]),
        _copy("reshape_q", 1, 2),
        _dispatch("mm_k", [0], [3]),
        _dispatch("attention", [2, 3], [5]),
    )
    field = ImmediateField("n", 0, 7)
    plan.symbolic_bindings = [SymbolicBinding(2, 0, field), SymbolicBinding(3, 0, field)]
    assert ComputePassBatchingPass().run(plan)
    assert _names(plan) == ["mm_q", "mm_k", "reshape_q", "attention"]
    assert [plan.operations[b.op_index].name for b in plan.symbolic_bindings] == ["mm_k", "attention"]


def test_views_keep_their_place() -> None:
    plan = _plan(_dispatch("a", [0], [1]), PlannedOp("view", "Reshape"), _dispatch("b", [1], [2]))
    assert not ComputePassBatchingPass().run(plan)
    assert _names(plan) == ["a", "view", "b"]


@pytest.mark.parametrize("seed", range(20))
def test_random_plans_keep_every_storage_dependency(seed: int) -> None:
    rng = random.Random(seed)
    ops = []
    for i in range(40):
        if rng.random() < 0.3:
            ops.append(_copy(f"op{i}", rng.randrange(12), rng.randrange(12)))
        else:
            ops.append(_dispatch(f"op{i}", rng.sample(range(12), 2), [rng.randrange(12)]))
    accesses = [_accesses(op) for op in ops]
    plan = _plan(*ops)
    before = count_segments(plan)
    ComputePassBatchingPass().run(plan)
    position = {op.name: i for i, op in enumerate(plan.operations)}
    for i, (reads_i, writes_i) in enumerate(accesses):
        for j in range(i + 1, len(ops)):
            reads_j, writes_j = accesses[j]
            if writes_i & (reads_j | writes_j) or reads_i & writes_j:
                assert position[f"op{i}"] < position[f"op{j}"], f"op{j} overtook op{i}"
    assert count_segments(plan) <= before


def _accesses(op: PlannedOp) -> tuple[set[BufferRef], set[BufferRef]]:
    step = op.steps[0]
    if isinstance(step, CopyBuffer):
        return {step.src}, {step.dst}
    assert isinstance(step, Dispatch)
    return {b.buffer for b in step.bindings if b.read_only}, {b.buffer for b in step.bindings if not b.read_only}
