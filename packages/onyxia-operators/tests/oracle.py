"""The one oracle helper: run a single-node ONNX model through Onyxia and onnxruntime, compare.

Every family, pass and end-to-end test goes through `check_op` (or `check_model` for a whole
model), so tolerances live in one table and a mismatch always reports the worst element.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

__all__ = [
    "EXACT_ON_CPU",
    "TOLERANCE",
    "adapter_is_cpu",
    "assert_close",
    "check_model",
    "check_op",
    "check_rebinding",
    "compile_model",
    "make_model",
    "runtime",
]

# dtype -> (rtol, atol)
TOLERANCE: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float32): (1e-4, 1e-5),
    np.dtype(np.float16): (1e-2, 1e-2),
}


class _ExactOnCpu(tuple[float, float]):
    """The type of `EXACT_ON_CPU`, told apart from a plain (0, 0) by `assert_close`."""


# A tolerance asking for the same values where each float operation rounds as written: bit for bit on a CPU
# rasteriser (`adapter_is_cpu`), within `GPU_EXACT_ULPS` elsewhere. For values onnxruntime (or an unfused plan)
# computes as a product, rounded, then a sum: WGSL lets a GPU's compiler contract `x * c + y` into one fused
# multiply-add and flush denormals to zero (NVIDIA's Vulkan driver does both), which rounds once where the
# reference rounds twice, and no WGSL spelling forbids it. A plain (0, 0) stays bit for bit everywhere.
EXACT_ON_CPU = _ExactOnCpu((0.0, 0.0))
# Contraction moves a value by an ULP of the product, not of the result (a sum that cancels keeps the product's
# error), so the bound is in ULPs of the output's largest finite magnitude. The H200 was 1 ULP off in the
# quantized products; NormAddNorm with every a * b + c of its kernels contracted (emulated on lavapipe) differed
# from its unfused plan by up to 3. About twice that.
GPU_EXACT_ULPS = 8


@cache
def runtime() -> Any:
    """One GPU device for the whole test session (creating one costs ~100 ms on lavapipe)."""
    from onyxia.runtime import Runtime

    return Runtime()


@cache
def adapter_is_cpu() -> bool:
    """Whether the tests run on a CPU rasteriser (lavapipe, CI's adapter and the reference machine), where each
    float operation rounds as written and denormals are kept; a GPU may do neither (`GPU_EXACT_ULPS`)."""
    from onyxia.runtime import adapter_facts_of

    return adapter_facts_of(runtime()).cpu


def exact_slack(expected: np.ndarray) -> float:
    """The absolute difference `EXACT_ON_CPU` allows: none on a CPU rasteriser, `GPU_EXACT_ULPS` ULPs of
    `expected`'s largest finite magnitude elsewhere."""
    finite = np.abs(expected[np.isfinite(expected)])
    if adapter_is_cpu() or finite.size == 0:
        return 0.0
    # the ULP from the exponent: np.spacing of the dtype's largest finite value overflows to inf
    _, exponent = np.frexp(float(finite.max()))
    return GPU_EXACT_ULPS * math.ldexp(1.0, int(exponent) - np.finfo(expected.dtype).nmant - 1)


def make_model(
    op_type: str,
    inputs: Mapping[str, np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
    *,
    opset: int = 21,
    domain: str = "",
    num_outputs: int = 1,
    initializers: Sequence[str] = (),
    dim_params: Mapping[str, Sequence[int | str]] | None = None,
    omit_outputs: Sequence[int] = (),
) -> onnx.ModelProto:
    """A one-node model; inputs named in `initializers` become initializers (compile-time known),
    and a None input is an omitted optional input; outputs at `omit_outputs` get ONNX's empty name."""
    dim_params = dim_params or {}
    graph_inputs, inits = [], []
    for name, value in inputs.items():
        if value is None:  # an omitted optional input (ONNX's empty name)
            continue
        if name in initializers:
            inits.append(onnx.numpy_helper.from_array(value, name))
            continue
        dims = dim_params.get(name, value.shape)
        elem = helper.np_dtype_to_tensor_dtype(value.dtype)
        graph_inputs.append(helper.make_tensor_value_info(name, elem, list(dims)))
    outputs = ["" if i in omit_outputs else f"y{i}" for i in range(num_outputs)]
    node = helper.make_node(
        op_type, [n if v is not None else "" for n, v in inputs.items()], outputs, domain=domain, **(attrs or {})
    )
    graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outputs if o]
    graph = helper.make_graph([node], f"{op_type}_test", graph_inputs, graph_outputs, inits)
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def reference_outputs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], reference: str) -> list[np.ndarray]:
    if reference == "onnx":
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(model).run(None, dict(feeds)))
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(None, dict(feeds)))


def compile_model(model: onnx.ModelProto, dims: Mapping[str, int] | None = None) -> Any:
    """Onyxia's `CompiledModel` for `model` (no GPU needed): tests assert on its steps."""
    from onyxia.compiler import CompilerPipeline
    from onyxia.onnx import load_and_parse_model
    from onyxia.operators import core_operator_registry

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "model.onnx")
        onnx.save_model(model, path)
        graph = load_and_parse_model(path)
    return CompilerPipeline(core_operator_registry()).compile(graph, dims or {})


def onyxia_outputs(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], dims: Mapping[str, int] | None = None
) -> list[np.ndarray]:
    executor = runtime().load_model(compile_model(model, dims))
    results = executor.run(dict(feeds))
    return [results[o.name] for o in model.graph.output]


def assert_close(
    actual: np.ndarray, expected: np.ndarray, name: str = "output", *, tolerance: tuple[float, float] | None = None
) -> None:
    """Equal shapes and dtypes, values within the dtype's (or the given float) tolerance; reports the worst element.

    `EXACT_ON_CPU` asks for the same float values: bit for bit on a CPU rasteriser, within `exact_slack` on a
    GPU (integers compare exactly either way)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"{name}: dtype {actual.dtype} != expected {expected.dtype}"
    if actual.size == 0:
        return
    if expected.dtype not in TOLERANCE and tolerance is None:
        mismatch = np.argwhere(actual != expected)
        assert mismatch.size == 0, (
            f"{name}: {len(mismatch)} elements differ; first at {tuple(mismatch[0])}: "
            f"{actual[tuple(mismatch[0])]} != {expected[tuple(mismatch[0])]}"
        )
        return
    rtol, atol = tolerance or TOLERANCE[expected.dtype]
    if isinstance(tolerance, _ExactOnCpu) and expected.dtype.kind == "f":
        atol = exact_slack(expected)
    a64, e64 = actual.astype(np.float64), expected.astype(np.float64)
    same_nan = np.isnan(a64) & np.isnan(e64)
    same_inf = np.isinf(e64) & (a64 == e64)
    with np.errstate(invalid="ignore"):  # inf - inf where an infinity is expected: masked by same_inf
        error = np.where(same_nan | same_inf, 0.0, np.abs(a64 - e64) - (atol + rtol * np.abs(e64)))
    error = np.nan_to_num(error, nan=np.inf)
    worst = np.unravel_index(int(np.argmax(error)), error.shape)
    assert error[worst] <= 0, (
        f"{name}: worst element at {tuple(int(i) for i in worst)}: got {actual[worst]}, expected {expected[worst]} "
        f"(rtol {rtol}, atol {atol})"
    )


def check_model(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    *,
    reference: str = "ort",
    dims: Mapping[str, int] | None = None,
    tolerance: tuple[float, float] | None = None,
) -> list[np.ndarray]:
    expected = reference_outputs(model, feeds, reference)
    actual = onyxia_outputs(model, feeds, dims)
    for output, a, e in zip(model.graph.output, actual, expected):
        assert_close(a, e, output.name, tolerance=tolerance)
    return actual


def check_rebinding(
    model: onnx.ModelProto, sizes: Sequence[Mapping[str, np.ndarray]], *, reference: str = "ort"
) -> None:
    """Run one compiled `model` on feeds of several sizes (its symbolic dims bound differently each
    time): every run matches the reference, and none creates a pipeline, because symbolic dims are
    immediates that `update_dimensions()` patches without recompiling."""
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for feeds in sizes:
        got = executor.run(dict(feeds))
        for output, expected in zip(model.graph.output, reference_outputs(model, feeds, reference)):
            assert_close(got[output.name], expected, output.name)
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines, f"feeds {list(feeds)} at a new size recompiled"


def check_op(
    op_type: str,
    inputs: Mapping[str, np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
    *,
    opset: int = 21,
    domain: str = "",
    reference: str = "ort",
    num_outputs: int = 1,
    initializers: Sequence[str] = (),
    dim_params: Mapping[str, Sequence[int | str]] | None = None,
    dims: Mapping[str, int] | None = None,
    tolerance: tuple[float, float] | None = None,
    omit_outputs: Sequence[int] = (),
) -> list[np.ndarray]:
    """Build a one-node model of `op_type`, run it on Onyxia and the reference, compare.

    `tolerance` (rtol, atol) replaces the dtype's entry, for ops whose reference sums in another order.
    """
    model = make_model(
        op_type,
        inputs,
        attrs,
        opset=opset,
        domain=domain,
        num_outputs=num_outputs,
        initializers=initializers,
        dim_params=dim_params,
        omit_outputs=omit_outputs,
    )
    feeds = {k: v for k, v in inputs.items() if k not in initializers and v is not None}
    return check_model(model, feeds, reference=reference, dims=dims, tolerance=tolerance)
