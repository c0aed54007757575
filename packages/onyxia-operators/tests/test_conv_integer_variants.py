"""ConvInteger and QLinearConv on every row of the conv variant table (operators/vision/conv_variants.py), forced
on lavapipe, equal to onnxruntime bit for bit: the tiled kernels' INTEGER mode and the integer `direct` kernel.

The geometries are test_conv_variants' (pointwise, padded, asymmetric pads, strides, dilations, groups, depthwise
with and without a channel multiplier, 1-D, 3-D), each under every variant that fits it. W and its zero point are
initializers (as exporters store them, so the GEMM packs them), x's zero point a graph input (as
DynamicQuantizeLinear makes it). The operand dtypes rotate over the cases so each variant sees every combination
onnxruntime registers: ConvInteger uint8 / int8 for x and w alike; QLinearConv uint8 x uint8, uint8 x int8, int8
x int8, with per-channel w_scale, int32 bias and (uint8 w) per-channel w_zero_point. Two ConvInteger forms are
checked against the ONNX reference instead: a per-channel w_zero_point, which onnxruntime refuses (2-D only, the
reference's limit), and int8 x with uint8 w, where onnxruntime's kernel saturates (measured: 47 of 224 outputs
of a depthwise 3 x 3 differ from the exact sums, even with x in [-64, 63]).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import reference_outputs, runtime
from test_conv_variants import CASES, OPEN, PAIRS, _compile

from onyxia.core.adapter_facts import force_variants
from onyxia.operators.vision.conv_variants import FAMILY

RNG = np.random.default_rng(17)
U8, S8 = np.uint8, np.int8
CONV_INTEGER_COMBOS = ((U8, U8), (U8, S8), (S8, U8), (S8, S8))  # (x, w)
QLINEAR_COMBOS = ((U8, U8, U8), (U8, S8, U8), (S8, S8, S8))  # (x, w, y)
FORMS = ("ConvInteger", "QLinearConv", "ConvInteger_per_channel")


def _bytes(dtype: type, shape: tuple[int, ...], narrow: bool = False) -> np.ndarray:
    """Random bytes; `narrow` int8 ones in [-64, 63] (onnxruntime's uint8 x int8 AVX2 kernel saturates pairwise
    sums of products beyond that, see test_qlinear_conv)."""
    info = np.iinfo(dtype)
    low, high = (-64, 63) if narrow and dtype == np.int8 else (info.min, info.max)
    return RNG.integers(low, high + 1, shape).astype(dtype)


def _model(
    op: str, x: tuple[int, ...], attrs: dict[str, Any], inputs: list[tuple[str, np.ndarray, bool]]
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One `op` node over `inputs` (name, value, whether it is an initializer); the first is x."""
    graph = helper.make_graph(
        [helper.make_node(op, [name for name, _, _ in inputs], ["y"], **attrs)],
        op,
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
            for name, v, constant in inputs
            if not constant
        ],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, name) for name, v, constant in inputs if constant],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    return model, {name: v for name, v, constant in inputs if not constant}


def _conv_integer(case: str, per_channel: bool) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    x, w, attrs = CASES[case]
    x_t, w_t = CONV_INTEGER_COMBOS[list(CASES).index(case) % len(CONV_INTEGER_COMBOS)]
    reference = "onnx" if per_channel or (x_t, w_t) == (S8, U8) else "ort"
    narrow = (x_t, w_t) == (U8, S8)
    inputs = [
        ("x", _bytes(x_t, x), False),
        ("w", _bytes(w_t, w, narrow), True),
        ("x_zp", _bytes(x_t, ()), False),
        ("w_zp", _bytes(w_t, (w[0],) if per_channel else (), narrow), True),
    ]
    return (*_model("ConvInteger", x, attrs, inputs), reference)


def _qlinear_conv(case: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    x, w, attrs = CASES[case]
    x_t, w_t, y_t = QLINEAR_COMBOS[list(CASES).index(case) % len(QLINEAR_COMBOS)]
    m = w[0]
    inputs = [
        ("x", _bytes(x_t, x), False),
        ("x_scale", np.array(0.021, np.float32), False),
        ("x_zp", _bytes(x_t, ()), False),
        ("w", _bytes(w_t, w, narrow=x_t == U8), True),
        ("w_scale", RNG.uniform(0.002, 0.03, m).astype(np.float32), True),
        ("w_zp", _bytes(U8, (m,)) if w_t == U8 else np.zeros(m, S8), True),  # onnxruntime's int8 ones are 0
        ("y_scale", np.array(0.6, np.float32), True),
        ("y_zp", _bytes(y_t, ()), True),
        ("bias", RNG.integers(-3000, 3000, m).astype(np.int32), True),
    ]
    return _model("QLinearConv", x, attrs, inputs)


def _build(form: str, case: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """The model, its feeds and its reference for `form` on `case`."""
    if form == "QLinearConv":
        return (*_qlinear_conv(case), "ort")
    return _conv_integer(case, form.endswith("per_channel"))


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], reference: str) -> set[str]:
    """Onyxia's output equals the reference's exactly; returns the plan's conv shader labels."""
    plan = _compile(model)
    got = runtime().load_model(plan).run(dict(feeds))["y"]
    (expected,) = reference_outputs(model, feeds, reference)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    np.testing.assert_array_equal(got, expected)
    return {s.label for s in plan.shaders if "conv" in s.label}


def _forms(case: str) -> list[str]:
    """The ONNX reference applies a per-channel w_zero_point to 4-D weights only."""
    return [f for f in FORMS if not f.endswith("per_channel") or len(CASES[case][1]) == 4]


@pytest.mark.parametrize(("variant", "case", "form"), [(v, c, f) for v, c in PAIRS for f in _forms(c)])
def test_variant_matches_onnxruntime(variant: str, case: str, form: str) -> None:
    model, feeds, reference = _build(form, case)
    with force_variants({FAMILY: variant}):
        labels = _run(model, feeds, reference)
    assert labels and all(label.endswith(f"@{variant}") for label in labels), labels


@pytest.mark.parametrize(
    ("case", "expected"),
    [("pointwise", "pointwise"), ("padded_3x3", "rows"), ("depthwise", "depthwise"), ("grouped", "rows")],
)
def test_constant_weights_take_the_tiled_kernels(case: str, expected: str) -> None:
    """Unforced, lavapipe picks the same tiled row for the integer ops as for a float Conv of the shape."""
    for form in ("ConvInteger", "QLinearConv"):
        model, feeds, reference = _build(form, case)
        labels = _run(model, feeds, reference)
        kernel = "depthwise" if expected == "depthwise" else "gemm"
        assert len(labels) == 1 and labels.pop().startswith(f"vision/conv_{kernel}@{expected}"), (form, labels)


@pytest.mark.parametrize(
    ("fed", "expected"), [("w", "quantized/conv_integer@direct"), ("w_zp", "vision/conv_gemm@rows")]
)
def test_run_time_inputs(fed: str, expected: str) -> None:
    """A W fed at run time cannot be packed at load: the direct kernel runs it. A w_zero_point fed at run time
    is read by the GEMM as it runs (it subtracts the zero points in the kernel, not at packing)."""
    model, feeds, reference = _build("ConvInteger", "padded_3x3")
    tensor = next(t for t in model.graph.initializer if t.name == fed)
    model.graph.initializer.remove(tensor)
    model.graph.input.append(helper.make_tensor_value_info(fed, tensor.data_type, list(tensor.dims)))
    feeds[fed] = numpy_helper.to_array(tensor)
    assert _run(model, feeds, reference) == {expected}


def test_full_range_sums_are_exact_on_the_gemm() -> None:
    """x = 0 with x_zp = 255 and w = 255 with w_zp = 0 over 64 * 3 * 3 taps: sums of -255 * 255 products need 23
    bits, exact in i32 (an f32 sum would round them)."""
    x, w = np.zeros((1, 64, 6, 7), np.uint8), np.full((8, 64, 3, 3), 255, np.uint8)
    x_zp, w_zp = np.array(255, np.uint8), np.array(0, np.uint8)
    inputs = [("x", x, False), ("w", w, True), ("x_zp", x_zp, False), ("w_zp", w_zp, True)]
    model, feeds = _model("ConvInteger", x.shape, {"pads": [1, 1, 1, 1]}, inputs)
    for variant in ("rows", "rows_simd"):
        with force_variants({FAMILY: variant}):
            _run(model, feeds, "ort")


@pytest.mark.parametrize(
    ("case", "form", "variant"),
    [
        ("strided", "QLinearConv", "rows_simd"),
        ("few_pointwise", "ConvInteger", "pointwise_few"),
        ("depthwise_strided_5x5", "QLinearConv", "depthwise_simd"),
        ("strided", "ConvInteger", "direct"),
    ],
)
def test_symbolic_spatial_dims(case: str, form: str, variant: str) -> None:
    """With the batch and spatial dims open the integer modes run the kernel a static shape would (the tiled
    ones take H, W and their tiles as immediates), one plan for two image sizes, exact against the reference."""
    model, _, reference = _build(form, case)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for axis, name in ((0, "n"), (2, "h"), (3, "w")):
        dims[axis].Clear()
        dims[axis].dim_param = name
    with force_variants({FAMILY: variant}):
        plan = _compile(model)
    assert {s.label.rsplit("@", 1)[1] for s in plan.shaders if "conv" in s.label} == {variant}
    executor = runtime().load_model(plan)
    for shape in (CASES[case][0], OPEN[case]):
        _, feeds, _ = _build(form, case)
        feeds["x"] = _bytes(feeds["x"].dtype.type, shape)
        (expected,) = reference_outputs(model, feeds, reference)
        np.testing.assert_array_equal(executor.run(dict(feeds))["y"], expected)
    assert executor.stats.plan_switches == 0
