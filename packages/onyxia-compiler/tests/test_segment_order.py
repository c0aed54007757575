"""`ComputePassBatchingPass` keeps `ReadValues` ordering: an operation sized by a dim read back
mid-run stays after the read even when it shares no buffer with it, and a read stays after the
operation that writes what it reads (`compiler.segment_order`)."""

from __future__ import annotations

from onyxia.compiler.passes import ComputePassBatchingPass
from onyxia.compiler.segment_order import read_value_dependencies
from onyxia.core import SymbolicExpr
from onyxia.core.plan import BindingDesc, BufferRef, CompiledModel, CopyBuffer, Dispatch, PlannedOp, ReadValues

COUNT = SymbolicExpr.name("nz:count")


def _t(tensor: int) -> BufferRef:
    return BufferRef(tensor=tensor)


def _dispatch(name: str, reads: list[int], writes: list[int], workgroups: object = 1) -> PlannedOp:
    bindings = [BindingDesc(i, _t(t), True) for i, t in enumerate(reads)]
    bindings += [BindingDesc(len(reads) + i, _t(t), False) for i, t in enumerate(writes)]
    return PlannedOp(name, "Custom", [Dispatch(0, bindings, (workgroups, 1, 1))])  # type: ignore[arg-type]


def _plan(*ops: PlannedOp) -> CompiledModel:
    return CompiledModel(list(ops), [], {}, [], [], [])


def _names(plan: CompiledModel) -> list[str]:
    return [op.name for op in plan.operations]


def test_an_operation_sized_by_a_read_back_dim_stays_after_the_read() -> None:
    """A copy first (so the scheduler would rather start with the dispatch that does not need it),
    then the read-back of a count, then a fill sized by the count that shares no buffer with it."""
    count = PlannedOp("count", "NonZero", [CopyBuffer(_t(0), _t(1), 4), ReadValues(_t(1), ("nz:count",))])
    fill = _dispatch("fill", [], [2], COUNT)
    plan = _plan(_dispatch("other", [0], [3]), count, fill)
    assert read_value_dependencies(plan) == {2: {1}}
    ComputePassBatchingPass().run(plan)
    assert _names(plan).index("fill") > _names(plan).index("count")


def test_a_read_waits_for_the_writer_of_its_buffer() -> None:
    """The read-back's own operation reads buffer 1, which an earlier operation writes."""
    writer = _dispatch("writer", [0], [1])
    reader = PlannedOp("read", "ReadBack", [ReadValues(_t(1), ("t:value[0]",))])
    plan = _plan(writer, _dispatch("copy_first", [0], [2]), reader)
    ComputePassBatchingPass().run(plan)
    assert _names(plan).index("read") > _names(plan).index("writer")


def test_plans_without_read_backs_have_no_extra_dependencies() -> None:
    assert read_value_dependencies(_plan(_dispatch("a", [0], [1], COUNT), _dispatch("b", [1], [2]))) == {}
