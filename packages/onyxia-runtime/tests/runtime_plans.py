"""Small hand-written plans for runtime tests, built with onyxia.core's `PlanBuilder` and `PlanCtx`.

Going through the real planner keeps the tests honest about what plans look like: static dims
become literals, symbolic dims become immediates with a `SymbolicBinding`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from onyxia.core import (
    CompiledModel,
    DataType,
    IrGraph,
    PlanBuilder,
    PlanCtx,
    ShaderLibrary,
    SymbolicExpr,
    TensorDef,
    TensorKind,
    TensorValue,
    ceil_div,
    shape_of,
)

__all__ = ["SCALE_WGSL", "ElementwiseSpec", "build_plan", "parse", "scale_plan"]

Dims = Sequence[int | str]

SCALE_WGSL = """#{HEADER}
@group(0) @binding(0) var<storage, read> x: array<#{T}>;
@group(0) @binding(1) var<storage, read_write> y: array<#{OUT_T}>;

@compute @workgroup_size(#{WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * #{WG}u + lid;
    if (i < #{N}) {
        y[i] = #{EXPR};
    }
}
"""


def parse(dims: Dims) -> tuple:
    return tuple(SymbolicExpr.parse(d) if isinstance(d, str) else d for d in dims)


class ElementwiseSpec:
    """Names for a one-node graph: inputs, outputs, extra tensors (weights, SYMBOLIC values)."""

    def __init__(self) -> None:
        self.graph = IrGraph("test")
        self.inputs: list[TensorDef] = []
        self.outputs: list[TensorDef] = []

    def input(self, name: str, dtype: DataType, dims: Dims) -> TensorDef:
        t = self.graph.add_tensor(name, dtype, shape_of(parse(dims)), TensorKind.INPUT)
        self.inputs.append(t)
        return t

    def output(self, name: str, dtype: DataType, dims: Dims) -> TensorDef:
        t = self.graph.add_tensor(name, dtype, shape_of(parse(dims)))
        self.outputs.append(t)
        return t

    def weight(self, name: str, array: np.ndarray) -> TensorDef:
        value = TensorValue.from_numpy(array, name)
        return self.graph.add_tensor(
            name, value.dtype, shape_of(array.shape), TensorKind.INITIALIZER, initializer=value
        )

    def symbolic(self, name: str, values: list[int | str]) -> TensorDef:
        data = np.array([SymbolicExpr.parse(v) if isinstance(v, str) else v for v in values], dtype=object)
        return self.graph.add_tensor(name, DataType.INT64, shape_of((len(values),)), value=data)


def build_plan(
    spec: ElementwiseSpec, plan: Callable[[PlanCtx], None], extra_inputs: Sequence[TensorDef] = (), **dims: int
) -> CompiledModel:
    """One node reading spec's inputs (+ `extra_inputs`) and writing its outputs, planned by `plan`."""
    node = spec.graph.add_node("Custom", [*spec.inputs, *extra_inputs], spec.outputs, name="custom_node")
    for t in spec.outputs:
        spec.graph.mark_output(t)
    builder = PlanBuilder(spec.graph, ShaderLibrary())
    ctx = PlanCtx(builder, node)
    plan(ctx)
    builder.operations.append(ctx.op)
    return builder.finish(dict(dims), {})


def scale_plan(
    dims: Dims,
    dtype: DataType = DataType.FLOAT,
    expr: str = "x[i] * 2.0",
    out_dtype: DataType | None = None,
    *,
    workgroup: int = 64,
    header: str = "",
    **model_dims: int,
) -> CompiledModel:
    """y = EXPR(x) elementwise over all of x; the shader reads its element count from #{N}."""
    spec = ElementwiseSpec()
    spec.input("x", dtype, dims)
    out = out_dtype or dtype
    spec.output("y", out, dims)

    def plan(ctx: PlanCtx) -> None:
        n = ctx.builder.plan_tensor(ctx.input_tensor(0)).numel
        defs = {"T": dtype.wgsl, "OUT_T": out.wgsl, "EXPR": expr, "WG": workgroup, "HEADER": header}
        shader = ctx.compile_shader("scale", SCALE_WGSL, defs, {"N": n})
        ctx.dispatch(shader, [ctx.input(0)], [ctx.output(0)], ceil_div(n, workgroup))

    return build_plan(spec, plan, (), **model_dims)
