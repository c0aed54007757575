"""Orderings a plan with `ReadValues` steps must keep beyond its storage dependencies.

A `ReadValues` step splits the run: the runtime submits what precedes it, reads a few words back
and binds dims (NonZero's count), then encodes the rest. An operation sized by such a dim must come
after the step even when it reads nothing the step's operation wrote: ``ConstantOfShape(Shape(
NonZero(x)))`` depends on the count only through its shape. `ComputePassBatchingPass` adds these
edges to the storage ones before it reorders, so no step ever runs under a count not read yet.
"""

from __future__ import annotations

from onyxia.core import CompiledModel, SymbolicExpr
from onyxia.core.plan import HOST_STEPS, CopyBuffer, Dispatch, PlannedOp, RunSubplan

__all__ = ["read_value_dependencies"]


def read_value_dependencies(plan: CompiledModel) -> dict[int, set[int]]:
    """Operation index -> the operations whose `ReadValues` bind a dim it uses (empty for most plans)."""
    binder: dict[str, int] = {}
    for index, op in enumerate(plan.operations):
        for step in op.steps:
            if isinstance(step, HOST_STEPS):
                binder.update({symbol: index for symbol in step.symbols})
    if not binder:
        return {}
    deps: dict[int, set[int]] = {}
    for index, op in enumerate(plan.operations):
        before = {binder[name] for name in _names(op) if name in binder and binder[name] != index}
        if before:
            deps[index] = before
    return deps


def _names(op: PlannedOp) -> set[str]:
    dims: list[object] = [s.size for s in op.scratch]
    for step in op.steps:
        if isinstance(step, Dispatch):
            dims += [*step.workgroups, *(f.value for f in step.immediates)]
            dims += [x for b in step.bindings for x in (b.offset, b.size)]
        elif isinstance(step, CopyBuffer):
            dims += [step.size, step.src_offset, step.dst_offset]
        elif isinstance(step, RunSubplan):  # its inputs' dims, the If condition and the trip count
            dims += [d for shape in step.input_dims for d in shape] + [step.condition, step.trip_count]
    return set().union(*(d.names() for d in dims if isinstance(d, SymbolicExpr)))
