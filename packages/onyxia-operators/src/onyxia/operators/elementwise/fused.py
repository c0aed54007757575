"""`FusedElementwiseOp` (com.onyxia::FusedElementwise): a chain of elementwise nodes as one dispatch.

`FuseElementwise` puts it in place of a chain whose intermediates each have one use (``Gelu(gate) *
up`` in every Gemma MLP): one dispatch instead of one per op, and no intermediate written to memory.
The ``body`` attribute lists the members as JSON, ``{"op", "name", "inputs", "attrs"}`` each; an input
is ``"x<k>"`` (the fused node's input k), ``"t<m>"`` (member m's result) or ``""`` (omitted), and the
last member's result is the output.

Nothing is re-derived. Inference and folding run the members' own family rows, in order, on a small
graph holding just the members (`_body`). The shader turns each member into a WGSL function whose
body is its row's `expression`; main() loads every input a member reads on the GPU once, through
its broadcast strides, and calls the functions in order. Inputs read only at compile time (Clip's
bounds, CastLike's dtype source) are not bound.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    Absent,
    DataType,
    FoldCtx,
    InferenceCtx,
    IrGraph,
    IrNode,
    NodeCtx,
    Operator,
    PlanCtx,
    TensorDef,
    TensorKind,
    TensorType,
    ceil_div,
    load_wgsl,
)
from onyxia.core.shader_dims import DimValue
from onyxia.core.shapes import dims_product
from onyxia.operators.elementwise.binary import BINARY, BinaryElementwiseOp
from onyxia.operators.elementwise.cast import CAST, CastOp, conversion
from onyxia.operators.elementwise.unary import UNARY, UnaryElementwiseOp
from onyxia.operators.elementwise.variadic import VARIADIC, VariadicElementwiseOp
from onyxia.operators.elementwise.widened import narrowed
from onyxia.operators.family import named_rows
from onyxia.operators.int64_checks import checked_defs, checked_expression
from onyxia.operators.layout import WORKGROUP_SIZE, collapse_broadcast, type_defs
from onyxia.operators.typesets import ALL_GPU, FLOATS, require_dtype

__all__ = ["FUSABLE", "FUSED_ELEMENTWISE", "FusedElementwiseOp", "can_fuse", "gpu_reads"]

_SOURCE = load_wgsl(__package__, "fused.wgsl")

FUSABLE: dict[str, Operator] = {**UNARY, **BINARY, **CAST, **VARIADIC}
"""The default-domain rows a fused body may hold, by op type (Sum, Mean, Max, Min with two inputs)."""

Member = tuple[list[tuple[str, int]], str]  # (WGSL parameter name, member input index) per parameter; expression


def can_fuse(op_type: str, inputs: Sequence[int | None]) -> bool:
    """Whether a default-domain node has a form a fused body holds (a variadic row: exactly two inputs)."""
    row = FUSABLE.get(op_type)
    if isinstance(row, VariadicElementwiseOp):
        return len(inputs) == 2 and None not in inputs
    return row is not None


def gpu_reads(op_type: str) -> tuple[int, ...]:
    """Which inputs of a member the shader reads (the rest are compile-time only)."""
    row = FUSABLE[op_type]
    if isinstance(row, BinaryElementwiseOp):
        return tuple(range(row.arity))
    return (0, 1) if isinstance(row, VariadicElementwiseOp) else (0,)


# ----- one WGSL function per member, from its family row ----------------------------------------
def _unary(ctx: NodeCtx, row: UnaryElementwiseOp) -> Member:
    dtype = ctx.input_dtype(0)
    require_dtype(ctx, dtype, row.dtypes)
    return [("x", 0)], _checked(ctx) or row.expression(ctx, dtype)


def _checked(ctx: NodeCtx) -> str | None:
    """The member's checked int64/uint64 form, if it has one (it then calls onyxia::errors)."""
    return checked_expression(ctx.node.op_type, ctx.input_dtype(0), ctx.output_tensor(0).dtype)


def _binary(ctx: NodeCtx, row: BinaryElementwiseOp) -> Member:
    dtype = ctx.input_dtype(row.arity - 2 if row.arity == 3 else 0)  # Where: x's dtype, not the condition's
    require_dtype(ctx, dtype, row.dtypes)
    expr = _checked(ctx) or row.expression(ctx, dtype)
    if row.bool_output:  # bool is stored as u32 0/1, as the binary shader writes it
        expr = f"select(0u, 1u, {expr})"
    return [(name, i) for i, name in zip(range(row.arity), "abc")], expr


def _variadic(ctx: NodeCtx, row: VariadicElementwiseOp) -> Member:
    dtype = ctx.input_dtype(0)
    require_dtype(ctx, dtype, row.dtypes if not row.mean else FLOATS)
    expr = narrowed(row.expr.format(T=dtype.wgsl), dtype)
    return [("a", 0), ("b", 1)], f"({expr}) / {dtype.wgsl}(2)" if row.mean else expr  # as its last step divides


def _cast(ctx: NodeCtx, row: CastOp) -> Member:
    x, y = ctx.input_dtype(0), ctx.output_tensor(0).dtype
    require_dtype(ctx, x, ALL_GPU, "input")
    require_dtype(ctx, y, ALL_GPU, "target")
    if _rounds_to_f16(x, y):  # f32(f16(x)) later in the shader may fold to x: round first (fused.wgsl)
        return [("x", 0)], "f16(round_to_f16(x))"
    return [("x", 0)], _checked(ctx) or conversion(x, y)


def _rounds_to_f16(x: DataType, y: DataType) -> bool:
    """Whether a cast narrows an f32-stored value (float32, or float64 stored as f32) to f16."""
    return y == DataType.FLOAT16 and x.wgsl == "f32"


_FUNCTIONS: dict[type, Callable[..., Member]] = {
    UnaryElementwiseOp: _unary,
    BinaryElementwiseOp: _binary,
    CastOp: _cast,
    VariadicElementwiseOp: _variadic,
}


def _member(ctx: NodeCtx) -> Member:
    row = FUSABLE[ctx.node.op_type]
    family = next(cls for cls in type(row).__mro__ if cls in _FUNCTIONS)
    return _FUNCTIONS[family](ctx, row)


# ----- the body graph ---------------------------------------------------------------------------
def _body(ctx: NodeCtx) -> tuple[IrGraph, list[IrNode]]:
    """The members as nodes of a graph of their own, outputs inferred; its inputs mirror the fused
    node's (dtype, shape, and the value when known)."""
    body = IrGraph(f"{ctx.node.name}/body")
    body.opset_imports = dict(ctx.graph.opset_imports)
    xs: list[TensorDef] = []
    for i in range(ctx.num_inputs):
        t = ctx.input_tensor(i)
        xs.append(body.add_tensor(f"x{i}", t.dtype, t.shape, TensorKind.INPUT, value=ctx.input_value(i)))
    results: list[TensorDef] = []
    members: list[IrNode] = []
    for k, step in enumerate(json.loads(ctx.attr_str("body"))):
        refs = [None if not r else xs[int(r[1:])] if r[0] == "x" else results[int(r[1:])] for r in step["inputs"]]
        out = body.add_tensor(f"t{k}", DataType.UNDEFINED, Absent())
        node = body.add_node(step["op"], refs, [out], step.get("attrs", {}), name=step.get("name"))
        dtype, shape = FUSABLE[node.op_type].infer_output_shapes(InferenceCtx(body, node))[0]
        out.dtype, out.shape = dtype, shape
        results.append(out)
        members.append(node)
    if not members:
        raise ctx.error("attribute 'body' lists no members")
    return body, members


@dataclass(frozen=True)
class FusedElementwiseOp:
    name: str = "fused_elementwise"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        body, members = _body(ctx)
        out = body.tensor(members[-1].outputs[0])
        return [TensorType(out.dtype, out.shape)]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        """The members' own folds, in order."""
        if not ctx.all_inputs_have_values():
            return None
        body, members = _body(ctx)
        for node in members:
            values = FUSABLE[node.op_type].try_fold(FoldCtx(body, node))
            if values is None:
                return None
            value = body.tensor(node.outputs[0]).value = np.asarray(values[0])
        return [value]  # the last member's: `_body` never returns an empty member list

    def plan(self, ctx: PlanCtx) -> None:
        out_dims = list(ctx.output_dims(0)) or [1]
        n = dims_product(out_dims)
        if n == 0:
            return
        body, members = _body(ctx)
        bound, functions, calls = _program(body, members)
        in_dims = [list(ctx.input_dims(k)) or [1] for k in bound]
        broadcast = any(d != out_dims for d in in_dims)
        index = [f"idx[{j}]" if broadcast else "i" for j in range(len(bound))]
        reads = [
            f"@group(0) @binding({j}) var<storage, read> in_{j}: array<{ctx.input_dtype(k).wgsl}>;"
            for j, k in enumerate(bound)
        ]
        defs: dict[str, object] = {
            **type_defs(Y_T=ctx.output_tensor(0).dtype),
            "READS": "\n".join(reads),
            "OUT_BINDING": len(bound),
            "MEMBERS": "\n".join(functions),
            "LOADS": "\n".join(f"    let v{j} = in_{j}[{index[j]}];" for j in range(len(bound))),
            "CALLS": "\n".join(calls),
            "RESULT": f"t{len(members) - 1}",
            "WORKGROUP_SIZE": WORKGROUP_SIZE,
        }
        if any(t.dtype == DataType.FLOAT16 for t in body.tensors):
            defs["F16"] = True
        if any(_narrows(body, node) for node in members):
            defs["ROUND_F16"] = True
        dims: dict[str, DimValue] = {"N": n}
        if broadcast:
            axes, strides = collapse_broadcast(in_dims, out_dims)  # fewer axes: fewer divisions per element
            defs.update(BROADCAST=True, RANK=len(axes), INPUTS=len(bound), STRIDE_COUNT=len(bound) * len(axes))
            dims["OUT_DIMS"] = axes
            dims["STRIDES"] = [s for input_strides in strides for s in input_strides]
        checked = [node for node in members if _checked(NodeCtx(body, node))]
        named = ", ".join(f"{n.op_type} '{n.name}'" for n in checked)
        errors = ctx.error_slot(f"member{'s' if len(checked) > 1 else ''} {named}") if checked else None
        defs.update(checked_defs(errors, len(bound) + 1))
        immediates = None if errors is None else errors.immediates
        shader = ctx.compile_shader("elementwise/fused", _SOURCE, defs, dims, immediates)
        writes = [ctx.output(0)] if errors is None else [ctx.output(0), errors.ref]
        ctx.dispatch(shader, [ctx.input(k) for k in bound], writes, ceil_div(n, WORKGROUP_SIZE))


def _narrows(body: IrGraph, node: IrNode) -> bool:
    out = body.tensor(node.outputs[0]).dtype
    return node.op_type in CAST and _rounds_to_f16(body.tensor(node.inputs[0]).dtype, out)


def _program(body: IrGraph, members: list[IrNode]) -> tuple[list[int], list[str], list[str]]:
    """(fused-node inputs the shader reads, in binding order; one WGSL fn per member; the calls)."""
    position = {t: i for i, t in enumerate(body.inputs)}
    bound: list[int] = []
    functions, calls = [], []
    for k, node in enumerate(members):
        params, expr = _member(NodeCtx(body, node))
        types = ", ".join(f"{p}: {body.tensor(node.inputs[i]).dtype.wgsl}" for p, i in params)
        out_type = body.tensor(node.outputs[0]).dtype.wgsl
        functions.append(f"fn m{k}({types}) -> {out_type} {{\n    return {expr};\n}}")
        args = []
        for _, i in params:
            t = node.inputs[i]
            if t in position:
                if position[t] not in bound:
                    bound.append(position[t])
                args.append(f"v{bound.index(position[t])}")
            else:
                producer = body.tensor_producer(t)
                assert producer is not None, (
                    f"fused body: member {k} input {i} is neither a fused input nor a member's output"
                )
                args.append(f"t{members.index(producer)}")
        calls.append(f"    let t{k} = m{k}({', '.join(args)});")
    return bound, functions, calls


FUSED_ELEMENTWISE: dict[str, FusedElementwiseOp] = named_rows({"FusedElementwise": FusedElementwiseOp()})  # com.onyxia
