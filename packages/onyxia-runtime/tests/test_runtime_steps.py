"""Plan features beyond one dispatch: copies, host writes, scratch, weights, SYMBOLIC tensors,
binding ranges and dims constraints."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_plans import SCALE_WGSL, ElementwiseSpec, build_plan

from onyxia.core import (
    BindingDesc,
    BufferRef,
    CompiledModel,
    DataType,
    DeviceError,
    Dispatch,
    InputError,
    PlanCtx,
    SymbolicDim,
    SymbolicExpr,
    WriteBuffer,
    ceil_div,
)
from onyxia.runtime import Runtime

GATHER_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<#{T}>;
@group(0) @binding(1) var<storage, read> w: array<#{T}>;
@group(0) @binding(2) var<storage, read_write> y: array<#{T}>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (i < #{N}) {
        y[i] = #{EXPR};
    }
}
"""


def _scale(ctx: PlanCtx, src: BufferRef, dst: BufferRef, n: SymbolicDim, expr: str = "x[i] * 2.0") -> None:
    defs = {"T": "f32", "OUT_T": "f32", "EXPR": expr, "WG": 64, "HEADER": ""}
    shader = ctx.compile_shader("scale", SCALE_WGSL, defs, {"N": n})
    ctx.dispatch(shader, [src], [dst], ceil_div(n, 64))


def test_copy_step_with_expression_size_and_offsets(any_runtime: Runtime) -> None:
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, ["n"])
    spec.output("y", DataType.FLOAT, ["n"])
    spec.output("z", DataType.FLOAT, ["n"])
    n = SymbolicExpr.name("n")

    def plan(ctx: PlanCtx) -> None:
        _scale(ctx, ctx.input(0), ctx.output(0), n)
        half = n // 2
        ctx.copy(ctx.output(0), ctx.output(1), (n - half) * 4, half * 4, 0)  # z[:n-half] = y[half:]
        ctx.copy(ctx.input(0), ctx.output(1), half * 4, 0, (n - half) * 4)  # z[n-half:] = x[:half]

    executor = any_runtime.load_model(build_plan(spec, plan))
    for size in (9, 40):
        x = np.arange(size, dtype=np.float32)
        out = executor.run({"x": x})
        np.testing.assert_array_equal(out["y"], x * 2)
        np.testing.assert_array_equal(out["z"], np.concatenate([(x * 2)[size // 2 :], x[: size // 2]]))


def test_write_buffer_and_scratch(runtime: Runtime) -> None:
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, ["n"])
    spec.output("y", DataType.FLOAT, ["n"])
    spec.output("z", DataType.FLOAT, [4])
    n = SymbolicExpr.name("n")
    table = np.array([1, 2, 3, 4], np.float32)

    def plan(ctx: PlanCtx) -> None:
        scratch = ctx.alloc_scratch(n * 4, "tmp")
        _scale(ctx, ctx.input(0), scratch, n, "x[i] + 1.0")  # two dispatches in one pass, through scratch
        _scale(ctx, scratch, ctx.output(0), n, "x[i] * 10.0")
        ctx.op.steps.append(WriteBuffer(ctx.output(1), table.tobytes()))

    executor = runtime.load_model(build_plan(spec, plan))
    x = np.arange(6, dtype=np.float32)
    out = executor.run({"x": x})
    np.testing.assert_array_equal(out["y"], (x + 1) * 10)
    np.testing.assert_array_equal(out["z"], table)


def test_weight_tensor(any_runtime: Runtime) -> None:
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, ["rows", 3])
    weight = spec.weight("w", np.array([0.5, -2.0, 4.0], np.float32))
    spec.output("y", DataType.FLOAT, ["rows", 3])

    def plan(ctx: PlanCtx) -> None:
        n = ctx.builder.plan_tensor(ctx.input_tensor(0)).numel
        shader = ctx.compile_shader("gather", GATHER_WGSL, {"T": "f32", "EXPR": "x[i] * w[i % 3u]"}, {"N": n})
        ctx.dispatch(shader, [ctx.input(0), ctx.input(1)], [ctx.output(0)], ceil_div(n, 64))

    compiled = build_plan(spec, plan, [weight])
    executor = any_runtime.load_model(compiled)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(executor.run({"x": x})["y"], x * np.array([0.5, -2.0, 4.0], np.float32))


def test_symbolic_tensor_rewritten_when_dims_change(any_runtime: Runtime) -> None:
    spec = ElementwiseSpec()
    spec.input("x", DataType.INT64, ["n"])
    shape_value = spec.symbolic("shape", ["n", "n * 2", -7])
    spec.output("y", DataType.INT64, [3])

    def plan(ctx: PlanCtx) -> None:
        shader = ctx.compile_shader("gather", GATHER_WGSL, {"T": "i32", "EXPR": "w[i] + x[0]"}, {"N": 3})
        ctx.dispatch(shader, [ctx.input(0), ctx.input(1)], [ctx.output(0)], 1)

    executor = any_runtime.load_model(build_plan(spec, plan, [shape_value]))
    for n in (2, 50):
        out = executor.run({"x": np.full(n, 100, np.int64)})["y"]
        np.testing.assert_array_equal(out, [n + 100, 2 * n + 100, 93])
    assert executor.stats.shader_modules_created == 1


def _ranged_plan(offset: int) -> CompiledModel:
    """y = 2 * x[offset/4 : offset/4 + 64], the slice taken by the binding range, not the shader."""
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, [128])
    spec.output("y", DataType.FLOAT, [64])

    def plan(ctx: PlanCtx) -> None:
        _scale(ctx, ctx.input(0), ctx.output(0), 64)
        step = ctx.op.steps[-1]
        assert isinstance(step, Dispatch)
        step.bindings[0] = BindingDesc(0, step.bindings[0].buffer, True, offset=offset, size=256)

    return build_plan(spec, plan)


def test_binding_ranges(runtime: Runtime) -> None:
    x = np.arange(128, dtype=np.float32)
    out = runtime.load_model(_ranged_plan(256)).run({"x": x})["y"]
    np.testing.assert_array_equal(out, x[64:] * 2)
    with pytest.raises(DeviceError, match=r"node 'custom_node': binding 0 \(tensor 'x'\): offset 4 is not a multiple"):
        runtime.load_model(_ranged_plan(4))


def test_whole_binding_over_the_limit(runtime: Runtime) -> None:
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, ["n"])
    spec.output("y", DataType.FLOAT, ["n"])
    compiled = build_plan(spec, lambda ctx: _scale(ctx, ctx.input(0), ctx.output(0), SymbolicExpr.name("n")))
    limit = runtime.limits["max-storage-buffer-binding-size"]
    with pytest.raises(DeviceError, match=rf"tensor 'x'\): bound whole at \d+ bytes.*binding-size of {limit}"):
        runtime.load_model(compiled, dims={"n": limit // 4 + 1})  # checked before anything is allocated


def test_constraint_violation_names_the_assumption(runtime: Runtime) -> None:
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, ["a"])
    spec.input("z", DataType.FLOAT, ["b"])
    spec.output("y", DataType.FLOAT, ["a"])
    compiled = build_plan(spec, lambda ctx: _scale(ctx, ctx.input(0), ctx.output(0), SymbolicExpr.name("a")))
    compiled.constraints.append((SymbolicExpr.name("a"), SymbolicExpr.name("b"), "node 'Add_1' broadcasts a with b"))
    executor = runtime.load_model(compiled)
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(executor.run({"x": x, "z": x})["y"], x * 2)
    with pytest.raises(InputError, match=r"\(node 'Add_1' broadcasts a with b\): 'a' = 4 but 'b' = 5"):
        executor.run({"x": x, "z": np.ones(5, np.float32)})
    np.testing.assert_array_equal(executor.run({"x": x, "z": x})["y"], x * 2)  # still usable after the error
