"""QuantizeLinear and DequantizeLinear against onnxruntime, bit for bit: every quantized dtype (int4/uint4 packed,
8 and 16 bits), per tensor, per axis and per block, with and without zero points, ties of x / scale (rounded half
to even), saturation, float16, a QDQ chain through int4, and 4-bit weights read packed from their initializers.

4-bit outputs are compared through a Cast to 8 bits on onnxruntime's side, and 4-bit inputs are initializers
there (its Python API exchanges no 4-bit arrays); Onyxia's side feeds and returns `ml_dtypes` arrays.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import assert_close, compile_model, reference_outputs, runtime

from onyxia.core import ShapeInferenceError

RNG = np.random.default_rng(21)
EXACT = (0.0, 0.0)
# name -> (ONNX code, Onyxia's host dtype, the 8/16-bit dtype onnxruntime reads it back as, range)
QUANTIZED = {
    "int4": (TensorProto.INT4, ml_dtypes.int4, np.int8, (-8, 7)),
    "uint4": (TensorProto.UINT4, ml_dtypes.uint4, np.uint8, (0, 15)),
    "int8": (TensorProto.INT8, np.int8, np.int8, (-128, 127)),
    "uint8": (TensorProto.UINT8, np.uint8, np.uint8, (0, 255)),
    "int16": (TensorProto.INT16, np.int16, np.int16, (-32768, 32767)),
    "uint16": (TensorProto.UINT16, np.uint16, np.uint16, (0, 65535)),
}
# (x shape, attributes, scale shape): per tensor, per axis (first, middle, last), per block (even and ragged)
LAYOUTS = {
    "tensor": ((4, 6), {}, ()),
    "axis0": ((5, 6), {"axis": 0}, (5,)),
    "axis1": ((2, 3, 5), {"axis": 1}, (3,)),
    "axis-1": ((3, 7), {"axis": -1}, (7,)),
    "block": ((3, 8), {"axis": 1, "block_size": 4}, (3, 2)),
    "block_ragged": ((2, 7, 3), {"axis": 1, "block_size": 3}, (2, 3, 3)),
}


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[int, tuple[int, ...]]],
    outputs: list[str],
    initializers: list[onnx.TensorProto],
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "quant",
        [helper.make_tensor_value_info(n, t, list(d)) for n, (t, d) in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _onyxia(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    results = runtime().load_model(compile_model(model)).run(feeds)
    return [results[o.name] for o in model.graph.output]


def _integers(name: str, shape: tuple[int, ...]) -> np.ndarray:
    _, host, _, (lo, hi) = QUANTIZED[name]
    return RNG.integers(lo, hi + 1, shape).astype(host)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", list(QUANTIZED))
@pytest.mark.parametrize("zero_point", [True, False])
def test_quantize_linear_matches_onnxruntime(name: str, layout: str, zero_point: bool) -> None:
    code, host, plain, (lo, hi) = QUANTIZED[name]
    shape, attrs, scale_shape = LAYOUTS[layout]
    scale = RNG.uniform(0.05, 0.5, scale_shape).astype(np.float32)
    x = RNG.uniform(-1.2, 1.2, shape).astype(np.float32) * (hi - lo) * float(scale.mean()) / 2
    flat = x.reshape(-1)  # exact ties of x / scale (a half), and values far past the range (saturated)
    flat[: min(6, flat.size)] = [2.5, -2.5, 3.5, -0.5, 1e6, -1e6][: min(6, flat.size)]
    if not scale_shape:
        flat[:4] *= float(scale)
    quantize_attrs = dict(attrs) if zero_point else {**attrs, "output_dtype": code}
    inputs = ["x", "s", "z"] if zero_point else ["x", "s"]
    node = helper.make_node("QuantizeLinear", inputs, ["y"], **quantize_attrs)
    back = helper.make_node("Cast", ["y"], ["y_wide"], to=helper.np_dtype_to_tensor_dtype(np.dtype(plain)))
    tensors = [numpy_helper.from_array(scale, "s")]
    if zero_point:
        tensors.append(numpy_helper.from_array(_integers(name, scale_shape), "z"))
    x_input = {"x": (TensorProto.FLOAT, shape)}
    (expected,) = reference_outputs(_model([node, back], x_input, ["y_wide"], tensors), {"x": x}, "ort")
    (got,) = _onyxia(_model([node], x_input, ["y"], tensors), {"x": x})
    assert got.dtype == np.dtype(host)
    assert_close(got.astype(plain), expected, f"QuantizeLinear -> {name}")


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", list(QUANTIZED))
def test_dequantize_linear_matches_onnxruntime(name: str, layout: str) -> None:
    """x as an initializer on both sides (the packed weight read on the GPU: the scale is a run-time input),
    and as a run-time input on Onyxia's side."""
    code, _, _, _ = QUANTIZED[name]
    shape, attrs, scale_shape = LAYOUTS[layout]
    x, zero = _integers(name, shape), _integers(name, scale_shape)
    scale = RNG.uniform(0.01, 2.0, scale_shape).astype(np.float32)
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], **attrs)
    scale_input = {"s": (TensorProto.FLOAT, scale_shape)}
    zero_tensor = numpy_helper.from_array(zero, "z")
    weight = _model([node], scale_input, ["y"], [numpy_helper.from_array(x, "x"), zero_tensor])
    (expected,) = reference_outputs(weight, {"s": scale}, "ort")
    (got,) = _onyxia(weight, {"s": scale})
    assert_close(got, expected, f"DequantizeLinear({name} weight)", tolerance=EXACT)
    fed = _model([node], {"x": (code, shape), **scale_input}, ["y"], [zero_tensor])
    (got,) = _onyxia(fed, {"x": x, "s": scale})
    assert_close(got, expected, f"DequantizeLinear({name} input)", tolerance=EXACT)


@pytest.mark.parametrize("name", ["int4", "uint4", "int8"])
def test_qdq_chain_float16(name: str) -> None:
    """float16 x and scale through QuantizeLinear -> DequantizeLinear per axis, the intermediate never read back."""
    code = QUANTIZED[name][0]
    x = RNG.uniform(-3, 3, (4, 9)).astype(np.float16)
    scale = RNG.uniform(0.1, 0.6, 9).astype(np.float16)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=1, output_dtype=code),
        helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1),
    ]
    model = _model(nodes, {"x": (TensorProto.FLOAT16, (4, 9))}, ["y"], [numpy_helper.from_array(scale, "s")])
    (expected,) = reference_outputs(model, {"x": x}, "ort")
    (got,) = _onyxia(model, {"x": x})
    assert_close(got, expected, "y", tolerance=EXACT)


def test_constant_quantize_dequantize_folds_like_the_kernels() -> None:
    """With every input constant, both ops fold on the host (int4 values unpacked from the initializer)."""
    x = RNG.uniform(-4, 4, (3, 5)).astype(np.float32)
    scale = np.array([0.5, 0.25, 1.0], np.float32)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=0),
        helper.make_node("Add", ["d", "g"], ["y"]),
    ]
    z = np.array([1, -2, 0], ml_dtypes.int4)
    tensors = [numpy_helper.from_array(v, n) for n, v in (("x", x), ("s", scale), ("z", z))]
    model = _model(nodes, {"g": (TensorProto.FLOAT, (3, 5))}, ["y"], tensors)
    g = RNG.standard_normal((3, 5)).astype(np.float32)
    (expected,) = reference_outputs(model, {"g": g}, "ort")
    (got,) = _onyxia(model, {"g": g})
    assert_close(got, expected, "y")


@pytest.mark.parametrize(
    ("attrs", "scale_shape", "message"),
    [
        ({"axis": 1}, (5,), r"input 1 \(scale\) has dims \[5\]; expected \[\] or \[6\] \(x dim 1\)"),
        ({"axis": 1, "block_size": 4}, (4, 1), r"with block_size 4 along axis 1 expected \[4, 2\]"),
    ],
)
def test_bad_scale_shapes_are_named(attrs: dict[str, int], scale_shape: tuple[int, ...], message: str) -> None:
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], **attrs)
    model = _model(
        [node],
        {"x": (TensorProto.INT8, (4, 6))},
        ["y"],
        [numpy_helper.from_array(np.ones(scale_shape, np.float32), "s")],
    )
    with pytest.raises(ShapeInferenceError, match=message):
        compile_model(model)


def test_folded_4bit_values_upload_packed() -> None:
    """A QuantizeLinear of constants folds to int4 values, which a run-time DequantizeLinear reads from the GPU
    (packed again when planned as a weight), and which a graph output returns as `ml_dtypes.int4`."""
    x = RNG.uniform(-3, 3, (4, 5)).astype(np.float32)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "qs"], ["q"], output_dtype=TensorProto.INT4),
        helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1),
        helper.make_node("Cast", ["q"], ["q8"], to=TensorProto.INT8),
    ]
    tensors = [numpy_helper.from_array(x, "x"), numpy_helper.from_array(np.float32(0.4), "qs")]
    scale = RNG.uniform(0.1, 1.0, 5).astype(np.float32)
    model = _model(nodes, {"s": (TensorProto.FLOAT, (5,))}, ["y", "q8"], tensors)
    expected = reference_outputs(model, {"s": scale}, "ort")
    with_q = _model(nodes[:2], {"s": (TensorProto.FLOAT, (5,))}, ["y", "q"], tensors)
    y, q = _onyxia(with_q, {"s": scale})
    assert_close(y, expected[0], "y", tolerance=EXACT)
    assert q.dtype == np.dtype(ml_dtypes.int4)
    assert_close(q.astype(np.int8), expected[1], "q")
