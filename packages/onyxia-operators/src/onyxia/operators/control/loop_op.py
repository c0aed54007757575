"""`Loop`: the body compiled into a plan of its own, run by the host once per iteration.

The iteration number and the condition are written by the host; loop-carried values go from one
iteration's results to the next one's inputs on the GPU; each scan output's per-iteration slices are
stacked on the GPU. The trip count and the first condition are read back unless known at compile time,
and the condition once per iteration unless the body passes it through unchanged (`LoopRoles`). A
carried value whose dims change from one iteration to the next is compiled with fresh dims that each
run binds from its input shape. Loops with a small constant trip count never get here: the loader
unrolls them (`onyxia.onnx.unroll_loops`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    IrGraph,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    Static,
    TensorType,
    shape_of,
)
from onyxia.core.plan import LoopRoles, RunSubplan
from onyxia.core.subgraphs import CAPTURED_INPUTS
from onyxia.core.symbolic import SymbolicDim
from onyxia.core.values import TensorValue
from onyxia.operators.control.subplans import (
    BodyInput,
    Subplan,
    bound_symbols,
    captured_bindings,
    compile_subgraph,
    fresh_symbol,
    known_names,
    node_buffers,
    outer_dims,
    output_buffers,
    result_dims,
)

__all__ = ["LoopOp"]


@dataclass(frozen=True)
class LoopOp(OperatorBase):
    name: str = "Loop"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        body, varying = _body(ctx)
        carried = _carried_count(ctx)
        known = known_names(ctx)
        types = []
        for k in range(ctx.num_outputs):
            dtype, dims = result_dims(body.plan, 1 + k)
            if k < carried:  # the final value: the initial dims, but where an iteration changes them
                initial = ctx.input_dims(2 + k)
                outer = tuple(fresh_symbol(ctx, k, a) if (k, a) in varying else d for a, d in enumerate(initial))
            else:  # stacked slices: the iteration count, then each slice's dims
                outer = (fresh_symbol(ctx, k, 0), *outer_dims(ctx, k, [dims], known))
                outer = (outer[0], *(_shift(ctx, k, d) for d in outer[1:]))
            types.append(TensorType(dtype, shape_of(outer)))
        return types

    def try_fold(self, ctx: FoldCtx) -> None:
        return None

    def plan(self, ctx: PlanCtx) -> None:
        body, _ = _body(ctx)
        carried = _carried_count(ctx)
        trip, first = _known_scalar(ctx, 0), _known_scalar(ctx, 1)
        needed = {i for i, _ in body.feeds} | {i for i, v in ((0, trip), (1, first)) if v is None and ctx.has_input(i)}
        refs, dims = node_buffers(ctx, needed)
        outs, out_dims = output_buffers(ctx)
        plan = body.plan
        names = [plan.tensors[t].name for t in plan.outputs]
        fed = dict(body.feeds)
        roles = LoopRoles(
            iteration=body.host_inputs[0],
            condition_in=body.host_inputs[1],
            condition_out=names[0],
            carried_in=tuple(fed.get(2 + k) for k in range(carried)),
            carried_out=tuple(names[1 : 1 + carried]),
            scanned=tuple(names[1 + carried :]),
            condition_passthrough=_passes_condition(ctx),
        )
        ctx.op.steps.append(
            RunSubplan(
                kind="Loop",
                node=ctx.node.name,
                plans=(plan,),
                inputs=refs,
                input_dims=dims,
                feeds=(body.feeds,),
                outputs=outs,
                output_dims=out_dims,
                results=(tuple(names[1:]),),
                symbols=bound_symbols(out_dims),
                condition=first if ctx.has_input(1) else 1,
                trip_count=trip,
                loop=roles,
            )
        )


def _shift(ctx: NodeCtx, output: int, dim: SymbolicDim) -> SymbolicDim:
    """A fresh slice symbol of axis a is axis a + 1 of the stacked output."""
    text = str(dim)
    prefix = f"{ctx.node.name}:{output}."
    if text.startswith(prefix):
        return fresh_symbol(ctx, output, int(text[len(prefix) :]) + 1)
    return dim


def _carried_count(ctx: NodeCtx) -> int:
    return ctx.num_inputs - int(ctx.attr(CAPTURED_INPUTS, 0)) - 2


def _known_scalar(ctx: NodeCtx, index: int) -> int | None:
    """Input `index` (the trip count M, the first condition) when known at compile time as a number."""
    if not ctx.has_input(index):
        return None
    value = ctx.input_value(index)
    if value is None or value.dtype == object:
        return None
    if value.size != 1:
        raise ctx.error(f"input {index} has {value.size} elements; expected a scalar")
    return int(np.asarray(value).reshape(-1)[0])


def _body(ctx: NodeCtx) -> tuple[Subplan, set[tuple[int, int]]]:
    """The body's plan, and the (carried value, axis) pairs whose dims an iteration changes."""
    carried = _carried_count(ctx)
    if carried < 0:
        raise ctx.error("expected the trip count and condition inputs (either may be empty) before the carried values")
    for index, dtype in ((0, DataType.INT64), (1, DataType.BOOL)):
        if ctx.has_input(index) and ctx.input_dtype(index) is not dtype:
            raise ctx.error(f"input {index} is {ctx.input_dtype(index).name.lower()}; expected {dtype.name.lower()}")
    scalars = [BodyInput(DataType.INT64, Static(())), BodyInput(DataType.BOOL, Static(()))]
    values = [BodyInput(ctx.input_dtype(2 + k), ctx.input_shape(2 + k), 2 + k) for k in range(carried)]
    bindings = [*scalars, *values, *captured_bindings(ctx)]
    body = compile_subgraph(ctx, "body", bindings)
    varying = _varying(ctx, body, carried)
    if varying:  # compile again with those dims free: each iteration binds them from its inputs
        for k in {k for k, _ in varying}:
            dims = tuple(
                fresh_symbol(ctx, k, a) if (k, a) in varying else d for a, d in enumerate(ctx.input_dims(2 + k))
            )
            values[k] = replace(values[k], shape=shape_of(dims))
        body = compile_subgraph(ctx, "body", [*scalars, *values, *captured_bindings(ctx)])
    return body, varying


def _varying(ctx: NodeCtx, body: Subplan, carried: int) -> set[tuple[int, int]]:
    outputs = len(body.plan.outputs)
    if outputs != 1 + ctx.num_outputs:
        raise ctx.error(f"the body has {outputs} outputs; expected the condition and one per node output")
    found = set()
    for k in range(carried):
        dtype, dims = result_dims(body.plan, 1 + k)
        initial = ctx.input_dims(2 + k)
        if dtype is not ctx.input_dtype(2 + k) or len(dims) != len(initial):
            raise ctx.error(
                f"carried value {k} enters as {ctx.input_dtype(2 + k).name.lower()} of rank {len(initial)} and leaves "
                f"the body as {dtype.name.lower()} of rank {len(dims)}; expected the same dtype and rank"
            )
        found |= {(k, a) for a, (d, i) in enumerate(zip(dims, initial)) if d != i}
    return found


def _passes_condition(ctx: NodeCtx) -> bool:
    """Whether the body returns its condition input unchanged (through Identity nodes), or a constant
    true: then no iteration needs a read-back to know whether to go on."""
    graph = ctx.attr("body")
    assert isinstance(graph, IrGraph), "checked when the body compiled"
    tid: int | None = graph.outputs[0]
    while tid is not None:
        tensor = graph.tensor(tid)
        if len(graph.inputs) > 1 and tid == graph.inputs[1]:
            return True
        producer = graph.tensor_producer(tid)
        if producer is not None and producer.op_type == "Constant":
            value = producer.attributes.get("value")
            array = value.numpy() if isinstance(value, TensorValue) else None
            return array is not None and array.size == 1 and bool(array.reshape(-1)[0])
        if tensor.initializer is not None:
            array = tensor.initializer.numpy()
            return array.size == 1 and bool(array.reshape(-1)[0])
        tid = producer.inputs[0] if producer is not None and producer.op_type == "Identity" else None
    return False
