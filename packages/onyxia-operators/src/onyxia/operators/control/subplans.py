"""Compiling a branch or loop body for the outer node, and the dims its results get outside.

The subgraph's inputs are typed from the node's inputs (its own, then its captured outer reads). An
input whose value the outer compile knows (a weight, a folded constant, a shape computed from dims)
is given to the subgraph as that value instead: it folds there, and the outer plan never feeds it.
What comes back has dims in the subplan's terms; outside, a dim stays as it is when it only names
dims the node's inputs carry, and otherwise becomes a fresh symbol that `RunSubplan` binds from the
result's shape at run time (a branch that returns a NonZero, a loop's iteration count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import CompiledModel, DataType, IrGraph, NodeCtx, OnyxiaError, PlanCtx, SymbolicExpr, TensorKind
from onyxia.core.plan import BufferRef
from onyxia.core.shapes import TensorShape
from onyxia.core.subgraphs import CAPTURED_INPUTS, active_subgraph_compiler
from onyxia.core.symbolic import SymbolicDim
from onyxia.core.values import TensorValue

__all__ = [
    "BodyInput",
    "Subplan",
    "bound_symbols",
    "captured_bindings",
    "compile_subgraph",
    "fresh_symbol",
    "input_binding",
    "known_names",
    "node_buffers",
    "outer_dims",
    "output_buffers",
    "result_dims",
]


@dataclass(frozen=True)
class BodyInput:
    """How one subgraph input is bound: its type, and the node input feeding it (None: fed by the host,
    a Loop's iteration number and condition) or the value it folds to."""

    dtype: DataType
    shape: TensorShape
    node_input: int | None = None
    value: np.ndarray | TensorValue | None = None


@dataclass(frozen=True)
class Subplan:
    plan: CompiledModel
    feeds: tuple[tuple[int, str], ...]  # (node input index, plan input name) of every input the outer plan feeds
    host_inputs: tuple[str | None, ...]  # plan input names of the inputs bound with node_input None


def captured_bindings(ctx: NodeCtx) -> list[BodyInput]:
    """The captured outer reads of the node as subgraph inputs (the last `CAPTURED_INPUTS` inputs)."""
    count = int(ctx.attr(CAPTURED_INPUTS, 0))
    return [input_binding(ctx, i) for i in range(ctx.num_inputs - count, ctx.num_inputs)]


def input_binding(ctx: NodeCtx, index: int) -> BodyInput:
    tensor = ctx.input_tensor(index)
    value: np.ndarray | TensorValue | None = tensor.initializer if tensor.initializer is not None else tensor.value
    return BodyInput(tensor.dtype, tensor.shape, index, value)


def compile_subgraph(ctx: NodeCtx, attribute: str, bindings: Sequence[BodyInput]) -> Subplan:
    """The plan of subgraph `attribute` with its inputs bound as `bindings` (one per subgraph input)."""
    graph = ctx.attr(attribute)
    if not isinstance(graph, IrGraph):
        raise ctx.error(f"attribute '{attribute}' is not a subgraph")
    if len(graph.inputs) != len(bindings):
        raise ctx.error(f"subgraph '{attribute}' has {len(graph.inputs)} inputs; the node binds {len(bindings)}")
    work = graph.copy()
    feeds: list[tuple[int, str]] = []
    host: list[str | None] = []
    for tid, binding in zip(list(work.inputs), bindings):
        tensor = work.tensor(tid)
        tensor.dtype, tensor.shape = binding.dtype, binding.shape
        if binding.value is not None:  # known outside: a constant inside, never fed
            work.inputs.remove(tid)
            tensor.kind = TensorKind.INITIALIZER
            if isinstance(binding.value, TensorValue):
                tensor.initializer = binding.value
            else:
                tensor.value = binding.value
        elif binding.node_input is None:
            host.append(tensor.name)
        else:
            feeds.append((binding.node_input, tensor.name))
    key = f"{ctx.node.name}/{attribute}:" + ";".join(_signature(b) for b in bindings)
    where = f"node '{ctx.node.name}' ({ctx.node.op_type})"
    try:
        plan = active_subgraph_compiler(where).compile_subgraph(work, key)
    except OnyxiaError as e:
        e.add_note(f"compiling subgraph '{attribute}' of {where}")
        raise
    _require_outside(ctx, plan, attribute)
    return Subplan(plan, tuple(feeds), tuple(host))


def _require_outside(ctx: NodeCtx, plan: CompiledModel, attribute: str) -> None:
    """The subplan's structure-setting dims that the outer graph knows are the outer plan's too: the child
    executor would refuse the subplan with them open, so the outer caller must fix them (onyxia.ort does)."""
    outside = known_names(ctx)
    for name, why in plan.static_required.items():
        if name in outside:
            ctx.mark_static_required([SymbolicExpr.name(name)], f"in subgraph '{attribute}', {why}")


def _signature(binding: BodyInput) -> str:
    value = binding.value
    shown = "" if value is None or isinstance(value, TensorValue) else f"={value.tolist()!r}"
    return f"{binding.dtype.name}{binding.shape}{shown}"


def result_dims(plan: CompiledModel, index: int) -> tuple[DataType, tuple[SymbolicDim, ...]]:
    """dtype and dims of the plan's output `index`."""
    tensor = plan.tensors[plan.outputs[index]]
    return tensor.dtype, tuple(tensor.dims)


def known_names(ctx: NodeCtx) -> set[str]:
    """Dim names the node's inputs carry: what a result dim may name and still mean the same outside."""
    names: set[str] = set()
    for i in range(ctx.num_inputs):
        if ctx.has_input(i):
            for d in ctx.input_dims(i):
                if isinstance(d, SymbolicExpr):
                    names |= d.names()
    return names


def outer_dims(
    ctx: NodeCtx, output: int, candidates: Sequence[tuple[SymbolicDim, ...]], known: set[str]
) -> tuple[SymbolicDim, ...]:
    """Output `output`'s dims outside: kept where every candidate (one per branch) agrees in known
    names, else the fresh symbol ``<node>:<output>.<axis>`` the run binds."""
    ranks = {len(dims) for dims in candidates}
    if len(ranks) != 1:
        raise ctx.error(f"output {output} has rank {sorted(ranks)} in different branches; Onyxia needs one rank")
    dims: list[SymbolicDim] = []
    for axis, values in enumerate(zip(*candidates)):
        first = values[0]
        same = all(v == first for v in values)
        names = first.names() if isinstance(first, SymbolicExpr) else set()
        dims.append(first if same and names <= known else fresh_symbol(ctx, output, axis))
    return tuple(dims)


def fresh_symbol(ctx: NodeCtx, output: int, axis: int) -> SymbolicExpr:
    return SymbolicExpr.name(f"{ctx.node.name}:{output}.{axis}")


def bound_symbols(dims: Sequence[Sequence[SymbolicDim]]) -> tuple[str, ...]:
    """The fresh symbols among `dims` (``<node>:<output>.<axis>``), each once."""
    found: dict[str, None] = {}
    for shape in dims:
        for d in shape:
            if isinstance(d, SymbolicExpr) and d.is_name and ":" in str(d):
                found.setdefault(str(d))
    return tuple(found)


def node_buffers(
    ctx: PlanCtx, needed: set[int]
) -> tuple[tuple[BufferRef | None, ...], tuple[tuple[SymbolicDim, ...], ...]]:
    """The buffers and dims of the node inputs in `needed` (None and () for the others: a value the
    subplans fold is never uploaded for this node)."""
    used = [i in needed and ctx.has_input(i) for i in range(ctx.num_inputs)]
    refs = tuple(ctx.input(i) if use else None for i, use in enumerate(used))
    dims = tuple(tuple(ctx.input_dims(i)) if use else () for i, use in enumerate(used))
    return refs, dims


def output_buffers(ctx: PlanCtx) -> tuple[tuple[BufferRef | None, ...], tuple[tuple[SymbolicDim, ...], ...]]:
    refs = tuple(ctx.output(i) if ctx.has_output(i) else None for i in range(ctx.num_outputs))
    dims = tuple(tuple(ctx.output_dims(i)) if ctx.has_output(i) else () for i in range(ctx.num_outputs))
    return refs, dims
