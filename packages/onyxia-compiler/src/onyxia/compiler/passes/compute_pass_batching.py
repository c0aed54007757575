"""`ComputePassBatchingPass`: order a plan's operations so copies cluster and compute passes get long.

The executor records one compute pass per run of consecutive dispatches; every CopyBuffer (a
Reshape the aliasing pass declined, a Scatter's copy of its data input, a one-input Sum) ends the
pass it interrupts, and each pass costs a begin/end on the host and a synchronisation on the
device. This pass list-schedules the operations over their storage dependencies: among the ready
operations it takes one that emits no command, else one that continues the current run
(dispatches after dispatches, copies after copies), else the earliest in the planner's order. A
copy thus waits until the dispatches that do not need it have run, and leaves together with the
other copies that became ready meanwhile.

Dependencies are on storage owners (`CompiledModel.storage_owners`: views and in-place state share
their source's buffer): an operation stays after every earlier one that writes what it reads or
writes, and after every earlier reader of what it writes. Any order that keeps these edges gives
the same results. It runs on the finished plan, before buffer sharing, which then sees the final
order; inside a pass WebGPU orders one dispatch's storage writes before the next one's reads, so
no barrier has to be planned.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterator

from onyxia.compiler.segment_order import read_value_dependencies
from onyxia.core import CompiledModel
from onyxia.core.plan import HOST_STEPS, BufferRef, CopyBuffer, Dispatch, PlannedOp, SymbolicBinding, WriteBuffer

__all__ = ["ComputePassBatchingPass", "count_segments"]

log = logging.getLogger(__name__)

_PASS, _COPY = "pass", "copy"  # what a step records: a dispatch in a compute pass, or a buffer copy


class ComputePassBatchingPass:
    """Plan-level, unlike the IR passes: `run(plan)` reorders `plan.operations` in place."""

    name = "ComputePassBatching"

    def run(self, plan: CompiledModel) -> bool:
        order = _schedule(plan)
        if order == list(range(len(plan.operations))):
            return False
        before = count_segments(plan)
        _reorder(plan, order)
        log.info("%s: %d command segments became %d", self.name, before, count_segments(plan))
        return True


def count_segments(plan: CompiledModel) -> int:
    """Compute passes plus copies, as the executor records them (0-size steps counted as live)."""
    kinds = [kind for op in plan.operations for kind in _kinds(op)]
    return sum(1 for i, kind in enumerate(kinds) if kind == _COPY or i == 0 or kinds[i - 1] != kind)


def _kinds(op: PlannedOp) -> Iterator[str]:
    for step in op.steps:
        if isinstance(step, Dispatch):
            yield _PASS
        elif isinstance(step, CopyBuffer):
            yield _COPY


def _accesses(op: PlannedOp, owners: dict[BufferRef, BufferRef]) -> tuple[set[BufferRef], set[BufferRef]]:
    """(read, written) storage owners; a read-write binding counts as written."""
    reads: set[BufferRef] = set()
    writes = {owners.get(ref, ref) for ref in (BufferRef(scratch=s.id) for s in op.scratch)}
    for step in op.steps:
        if isinstance(step, Dispatch):
            for b in step.bindings:
                (reads if b.read_only else writes).add(owners.get(b.buffer, b.buffer))
        elif isinstance(step, CopyBuffer):
            reads.add(owners.get(step.src, step.src))
            writes.add(owners.get(step.dst, step.dst))
        elif isinstance(step, WriteBuffer):
            writes.add(owners.get(step.dst, step.dst))
        elif isinstance(step, HOST_STEPS):  # read back or run by the host mid-run: ordered like a dispatch
            reads.update(owners.get(ref, ref) for ref in step.reads())
            writes.update(owners.get(ref, ref) for ref in step.writes())
    return reads - writes, writes


def _dependencies(plan: CompiledModel) -> list[set[int]]:
    """For each operation, the earlier operations it must follow (read/write conflicts on storage)."""
    owners = plan.storage_owners()
    writer: dict[BufferRef, int] = {}
    readers: dict[BufferRef, list[int]] = {}
    deps: list[set[int]] = []
    for index, op in enumerate(plan.operations):
        reads, writes = _accesses(op, owners)
        mine = {writer[r] for r in reads | writes if r in writer}
        mine.update(i for r in writes for i in readers.get(r, ()))
        for r in reads:
            readers.setdefault(r, []).append(index)
        for r in writes:
            writer[r], readers[r] = index, []
        if not op.steps and index:
            mine.add(index - 1)  # a view emits nothing: it keeps its place, so the plan still reads in order
        mine.discard(index)
        deps.append(mine)
    for index, before in read_value_dependencies(plan).items():  # sized by a dim read back mid-run
        deps[index] |= before
    return deps


def _schedule(plan: CompiledModel) -> list[int]:
    deps = _dependencies(plan)
    users: list[list[int]] = [[] for _ in deps]
    for index, before in enumerate(deps):
        for d in before:
            users[d].append(index)
    waiting = [len(d) for d in deps]
    kinds = [list(_kinds(op)) for op in plan.operations]
    ready: dict[str | None, list[int]] = {None: [], _PASS: [], _COPY: []}  # by the kind an op starts with
    for index, count in enumerate(waiting):
        if not count:
            heapq.heappush(ready[kinds[index][0] if kinds[index] else None], index)
    order: list[int] = []
    mode: str | None = None
    while any(ready.values()):
        queue = next((ready[k] for k in (None, mode) if ready[k]), None)
        if queue is None:
            queue = min((q for q in ready.values() if q), key=lambda q: q[0])
        index = heapq.heappop(queue)
        order.append(index)
        mode = kinds[index][-1] if kinds[index] else mode
        for user in users[index]:
            waiting[user] -= 1
            if not waiting[user]:
                heapq.heappush(ready[kinds[user][0] if kinds[user] else None], user)
    assert len(order) == len(deps), "plan dependencies form a cycle"
    return order


def _reorder(plan: CompiledModel, order: list[int]) -> None:
    position = {old: new for new, old in enumerate(order)}
    plan.operations = [plan.operations[i] for i in order]
    plan.symbolic_bindings = [
        SymbolicBinding(position[b.op_index], b.step_index, b.field) for b in plan.symbolic_bindings
    ]
