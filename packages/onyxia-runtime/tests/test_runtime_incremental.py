"""Dims changes committed incrementally: the layout and program equal a full re-layout's, results stay
right, the full path runs only where a buffer grows, and a fallback the full path does not confirm is
counted. Also the native encoder against the public one."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
from runtime_plans import SCALE_WGSL, ElementwiseSpec, build_plan

import onyxia.runtime.dims_commit as dims_commit
from onyxia.core import BufferRef, CompiledModel, DataType, OnyxiaError, PlanCtx, SymbolicExpr, ceil_div
from onyxia.core.plan import Dispatch
from onyxia.core.settings import override
from onyxia.core.symbolic import SymbolicDim, evaluate_dim
from onyxia.runtime import PlanExecutor, Runtime
from onyxia.runtime.commands import PUBLIC_CALLS
from onyxia.runtime.dim_program import DimProgram, gather
from onyxia.runtime.layout import DimsLayout, evaluate_layout
from onyxia.runtime.native_encode import native_calls
from onyxia.runtime.program import build_program

GATHER_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<i32>;
@group(0) @binding(1) var<storage, read> w: array<i32>;
@group(0) @binding(2) var<storage, read_write> y: array<i32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (lid < 3u) {
        y[lid] = w[lid];
    }
}
"""


def _scale(ctx: PlanCtx, src: BufferRef, dst: BufferRef, n: SymbolicDim, expr: str) -> None:
    defs = {"T": "f32", "OUT_T": "f32", "EXPR": expr, "WG": 64, "HEADER": ""}
    shader = ctx.compile_shader("scale", SCALE_WGSL, defs, {"N": n})
    ctx.dispatch(shader, [src], [dst], ceil_div(n, 64))


def _decode_like_plan() -> CompiledModel:
    """Two dims like a decoder's: `n` (new tokens, bound by the input) and `p` (past, bound by hand).

    y = 2x; z = y's upper half then x's lower half (two copies, the second 0-size at n = 1);
    t = [0, 1, ..., p + n - 1] (a buffer that grows with p); s = the SYMBOLIC values [n, p + n, -7]."""
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, ["n"])
    shape_value = spec.symbolic("shape", ["n", "p + n", -7])
    spec.output("y", DataType.FLOAT, ["n"])
    spec.output("z", DataType.FLOAT, ["n"])
    spec.output("t", DataType.FLOAT, ["p + n"])
    spec.output("s", DataType.INT64, [3])
    n, p = SymbolicExpr.name("n"), SymbolicExpr.name("p")

    def plan(ctx: PlanCtx) -> None:
        _scale(ctx, ctx.input(0), ctx.output(0), n, "x[i] * 2.0")
        half = n // 2
        ctx.copy(ctx.output(0), ctx.output(1), (n - half) * 4, half * 4, 0)
        ctx.copy(ctx.input(0), ctx.output(1), half * 4, 0, (n - half) * 4)
        _scale(ctx, ctx.input(0), ctx.output(2), p + n, "f32(i)")
        shader = ctx.compile_shader("gather", GATHER_WGSL, {}, {})
        ctx.dispatch(shader, [ctx.input(0), ctx.input(1)], [ctx.output(3)], 1)

    return build_plan(spec, plan, [shape_value])


def _expected(x: np.ndarray, p: int) -> dict[str, np.ndarray]:
    n, y = len(x), x * 2
    return {
        "y": y,
        "z": np.concatenate([y[n // 2 :], x[: n // 2]]),
        "t": np.arange(p + n, dtype=np.float32),
        "s": np.array([n, p + n, -7], np.int64),
    }


def _assert_matches_full_relayout(executor: PlanExecutor) -> None:
    """White box: the committed layout and program are those a full re-layout would build now."""
    layout = executor._layout
    assert layout is not None
    full = evaluate_layout(executor.compiled, executor._flat, executor.dims, executor.ctx, executor._names)
    assert layout.steps == full.steps
    assert layout.buffer_bytes == full.buffer_bytes
    assert layout.output_shapes == full.output_shapes
    assert layout.symbolic.keys() == full.symbolic.keys()
    for ref, array in full.symbolic.items():
        np.testing.assert_array_equal(layout.symbolic[ref], array)
    rebuilt = build_program(executor._flat, executor._states, full, executor._pool)
    assert executor._program.segments == rebuilt.segments
    assert executor._program.dispatches == rebuilt.dispatches


def test_incremental_updates_match_a_full_relayout(any_runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    full_layouts: list[tuple[Any, ...]] = []

    def spy(*args: Any) -> DimsLayout:
        full_layouts.append(args)
        return evaluate_layout(*args)

    monkeypatch.setattr(dims_commit, "evaluate_layout", spy)
    executor = any_runtime.load_model(_decode_like_plan(), dims={"p": 0})
    modules, pipelines = executor.stats.shader_modules_created, executor.stats.pipelines_created
    rng = np.random.default_rng(0)
    # prefill, decode steps (p + 1 each, n = 1: the second copy becomes 0-size), a shrink, growth past
    # the allocation (full path), decode again, and back to a prefill
    schedule = [(5, 0), (1, 5), (1, 6), (1, 7), (2, 8), (1, 10), (1, 0), (3, 3000), (1, 3003), (1, 3004), (6, 1)]
    for n, p in schedule:
        executor.update_dimensions({"p": p})
        x = rng.standard_normal(n).astype(np.float32)
        out = executor.run({"x": x})
        for name, expected in _expected(x, p).items():
            np.testing.assert_array_equal(out[name], expected, err_msg=f"{name} at n={n}, p={p}")
        _assert_matches_full_relayout(executor)
    assert executor.stats.shader_modules_created == modules
    assert executor.stats.pipelines_created == pipelines
    # full re-layouts only for the first dims and where a buffer outgrew its allocation: t at p = 5 and
    # p = 3000 (set before the run binds the new n), x and y at n = 6
    assert [a[2] for a in full_layouts] == [{"n": 5, "p": 0}, {"n": 5, "p": 5}, {"n": 1, "p": 3000}, {"n": 6, "p": 1}]


def test_preallocated_executor_never_takes_the_full_path(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    executor = runtime.load_model(_decode_like_plan(), dims={"p": 0}, max_dims={"n": 8, "p": 64})
    executor.run({"x": np.ones(8, np.float32)})
    bind_groups = executor.stats.bind_groups_created

    def refuse(*args: object) -> None:
        raise AssertionError("full re-layout on a decode step")

    monkeypatch.setattr(dims_commit, "evaluate_layout", refuse)
    for p in range(8, 40):
        executor.update_dimensions({"p": p})
        out = executor.run({"x": np.full(1, p, np.float32)})
        np.testing.assert_array_equal(out["t"], np.arange(p + 1, dtype=np.float32))
        np.testing.assert_array_equal(out["s"], [1, p + 1, -7])
    assert executor.stats.bind_groups_created == bind_groups  # no range moved, no buffer reallocated


def test_decode_steps_inside_the_allocation_skip_the_pool(runtime: Runtime) -> None:
    """Once a growing buffer has been (re)allocated, the steps that still fit in it do not ask the pool
    again: `t` grows by 4 bytes a step, and checking every such buffer each step cost a decode step
    a quarter of its update."""
    executor = runtime.load_model(_decode_like_plan(), dims={"p": 0}, max_dims={"n": 8, "p": 64})
    executor.run({"x": np.ones(8, np.float32)})
    asked: list[BufferRef] = []
    ensure = executor._pool.ensure

    def counting(ref: BufferRef, nbytes: int) -> bool:
        asked.append(ref)
        return ensure(ref, nbytes)

    executor._pool.ensure = counting  # type: ignore[method-assign]
    for p in range(8, 40):
        executor.update_dimensions({"p": p})
    first = len(asked)
    for p in range(40, 60):
        executor.update_dimensions({"p": p})
        out = executor.run({"x": np.full(1, p, np.float32)})
        np.testing.assert_array_equal(out["t"], np.arange(p + 1, dtype=np.float32))
    assert first <= 1 and len(asked) == first  # at most the first step past the loaded size asks


def test_incremental_failures_fall_back_counted_and_logged_once(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    executor = runtime.load_model(_decode_like_plan(), dims={"p": 0})
    x = np.arange(3, dtype=np.float32)
    executor.run({"x": x})
    real = executor._incremental.update

    def broken(base: object, dims: object) -> None:
        raise ZeroDivisionError("integer division or modulo by zero")

    with caplog.at_level(logging.WARNING, logger=dims_commit.__name__):
        for p, update in [(1, lambda base, dims: None), (2, lambda base, dims: None), (3, broken)]:
            monkeypatch.setattr(executor._incremental, "update", update)
            executor.update_dimensions({"p": p})
            for name, expected in _expected(x, p).items():
                np.testing.assert_array_equal(executor.run({"x": x})[name], expected)
    assert executor.stats.layout_fallbacks == 3
    assert [r.getMessage() for r in caplog.records] == [
        "incremental layout declined dims {'p': 1, 'n': 3}, which the full re-layout accepted"
    ]
    # where the dims are wrong the full path raises too: an error, not a fallback
    monkeypatch.setattr(executor._incremental, "update", real)
    with pytest.raises(OnyxiaError, match="SYMBOLIC tensor 'shape'"):
        executor.update_dimensions({"p": 1 << 32})  # s = [n, p + n, -7] no longer fits the GPU's int32
    assert executor.stats.layout_fallbacks == 3
    executor.update_dimensions({"p": 4})
    assert executor.stats.layout_fallbacks == 3 and executor.run({"x": x})["t"].shape == (7,)


@pytest.mark.parametrize(
    "text",
    [
        "a",
        "a + 3",
        "(a + 63) / 64",
        "a * b - 7",
        "(a - b) / 3",
        "(a - b) % 3",
        "a % 5 * (b + 1) / 2",
        "min(a, 10) - max(0, b - 5)",
    ],
)
def test_compiled_dims_equal_evaluate_dim(text: str) -> None:
    dim = SymbolicExpr.parse(text)
    program = DimProgram()
    slots = program.add_all([dim, 4, None, dim, dim])
    for a, b in [(0, 0), (1, 9), (10, 3), (64, 65), (1000, 1)]:
        value = evaluate_dim(dim, {"a": a, "b": b})
        vals = program({"a": a, "b": b})
        assert [vals[s] for s in slots] == [value, 4, None, value, value]


def test_compiled_dims_share_equal_subexpressions() -> None:
    program = DimProgram()
    total = SymbolicExpr.parse("p + n")
    slots = program.add_all([ceil_div(total, 64), total, ceil_div(total, 64), 64])
    # names n and p, n + p, 63 and n + p + 63, 64 and the division: each once
    assert len(program) == 7 and slots[0] == slots[2]
    assert gather(slots)(program({"p": 100, "n": 1})) == (2, 101, 2, 64)
    assert gather(slots[:1])(program({"p": 1, "n": 1})) == (1,) and gather(())([]) == ()


def test_compiled_dims_raise_like_python() -> None:
    program = DimProgram()
    program.add(SymbolicExpr.parse("a / b"))
    with pytest.raises(ZeroDivisionError):
        program({"a": 1, "b": 0})
    with pytest.raises(KeyError):
        program({"a": 1})


def test_native_encoder_matches_the_public_api(any_runtime: Runtime) -> None:
    native = any_runtime.load_model(_decode_like_plan(), dims={"p": 3})
    public = any_runtime.load_model(_decode_like_plan(), dims={"p": 3})
    assert native._calls is not PUBLIC_CALLS, "wgpu-native's entry points were not found"
    public._calls = PUBLIC_CALLS
    for n in (5, 1, 2):
        x = np.arange(n, dtype=np.float32)
        a, b = native.run({"x": x}), public.run({"x": x})
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    with override(native_encode=False):  # what ONYXIA_NATIVE_ENCODE=0 sets
        assert native_calls(any_runtime.ctx.device) is None


def _prefill_only_plan() -> CompiledModel:
    """y = 2x, and u = [0.5, 1.5, ..., p + n - 0.5] by a dispatch of (n - 1, 64) workgroups: skipped
    at n = 1 (a decode step), although its immediate (u's length) follows p."""
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, ["n"])
    spec.output("y", DataType.FLOAT, ["n"])
    spec.output("u", DataType.FLOAT, ["p + n"])
    n, p = SymbolicExpr.name("n"), SymbolicExpr.name("p")

    def plan(ctx: PlanCtx) -> None:
        _scale(ctx, ctx.input(0), ctx.output(0), n, "x[i] * 2.0")
        defs = {"T": "f32", "OUT_T": "f32", "EXPR": "f32(i) + 0.5", "WG": 64, "HEADER": ""}
        shader = ctx.compile_shader("scale", SCALE_WGSL, defs, {"N": p + n})
        ctx.dispatch(shader, [ctx.input(0)], [ctx.output(1)], (n - 1, 64))

    return build_plan(spec, plan)


def test_a_skipped_dispatch_whose_counts_did_not_move_is_not_evaluated(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decode step moves `p` only: the prefill-only dispatch stays skipped, so the incremental
    layout does not evaluate it, yet the layout equals a full re-layout's and a prefill runs it."""
    import onyxia.runtime.dim_items as dim_items
    import onyxia.runtime.incremental as incremental

    executor = runtime.load_model(_prefill_only_plan(), dims={"p": 0}, max_dims={"n": 8, "p": 64})
    prefill_only = next(
        i for i, fs in enumerate(executor._flat) if isinstance(fs.step, Dispatch) and fs.step.workgroups[1] == 64
    )
    affected = executor._incremental._affected(frozenset({"p"}))
    assert prefill_only in [step.key for step, *_ in affected.steps]  # its immediate reads p
    evaluated: list[int] = []
    real = dim_items.step_values

    def spy(item: Any, *args: Any) -> Any:
        evaluated.append(item.key)
        return real(item, *args)

    monkeypatch.setattr(incremental, "step_values", spy)
    for n, p in [(4, 0), (1, 4), (1, 5), (1, 6), (3, 7), (1, 10), (1, 11)]:
        executor.update_dimensions({"p": p})
        x = np.arange(n, dtype=np.float32)
        out = executor.run({"x": x})
        np.testing.assert_array_equal(out["y"], x * 2)
        if n > 1:
            np.testing.assert_array_equal(out["u"], np.arange(p + n, dtype=np.float32) + 0.5)
        _assert_matches_full_relayout(executor)
        if n == 1:  # the run bound n = 1: the next decode step's p leaves the skipped dispatch alone
            evaluated.clear()
            executor.update_dimensions({"p": p + 1})
            assert prefill_only not in evaluated
            _assert_matches_full_relayout(executor)
