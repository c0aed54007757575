"""The 8-bit ops of onnxruntime's `quantize_dynamic` (onnx-community int8/uint8 files) against onnxruntime, bit
for bit: DynamicQuantizeLinear (with its edge cases), MatMulInteger (uint8/int8 operands, zero points, shapes,
a constant weight packed 4 bytes per word and a runtime B), com.microsoft MatMulIntegerToFloat, DequantizeLinear,
and the fuse_cast_mul_into_MatMulInteger rule (match, declines, the quantize_dynamic chain at two sizes)."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import EXACT_ON_CPU, check_op, compile_model, make_model, onyxia_outputs, reference_outputs

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, ShapeInferenceError, UnsupportedOpError
from onyxia.core.rewrite.engine import try_rule
from onyxia.operators import core_operator_registry
from onyxia.operators.quantized.dynamic_quantize_linear import dynamic_quantize
from onyxia.operators.quantized.fusions import FUSE_CAST_MUL_INTO_MATMUL_INTEGER

RNG = np.random.default_rng(9)
EXACT = (0.0, 0.0)
BYTES = {"u8": np.uint8, "i8": np.int8}


def _bytes(dtype: type, *shape: int) -> np.ndarray:
    """Random bytes; int8 ones in [-64, 63]. onnxruntime's uint8 x int8 kernel on AVX2 CPUs without VNNI
    (this CI machine) sums pairs of products with vpmaddubsw, which saturates at the int16 range, so its
    result is exact only while 255 * |b| * 2 stays below 32768; Onyxia's int32 sums are exact at any
    range (`test_uint8_by_int8_is_exact_over_the_full_range`)."""
    info = np.iinfo(dtype)
    low, high = (-64, 63) if dtype == np.int8 else (info.min, info.max)
    return RNG.integers(low, high + 1, shape).astype(dtype)


# (a shape, b shape): a decode GEMV, a K and N off the 4-byte words, prefill rows, batches folded into M
SHAPES = [((1, 64), (64, 16)), ((3, 13), (13, 7)), ((5, 8), (8, 12)), ((2, 3, 4, 9), (9, 6)), ((6,), (6, 5))]


@pytest.mark.parametrize("a_t", sorted(BYTES))
@pytest.mark.parametrize("b_t", sorted(BYTES))
@pytest.mark.parametrize("zero_points", ["none", "scalar", "per_column"])
@pytest.mark.parametrize("weight", [True, False], ids=["constant_b", "runtime_b"])
def test_matmul_integer(a_t: str, b_t: str, zero_points: str, weight: bool) -> None:
    for a_shape, b_shape in SHAPES:
        a, b = _bytes(BYTES[a_t], *a_shape), _bytes(BYTES[b_t], *b_shape)
        inputs: dict[str, np.ndarray | None] = {"a": a, "b": b}
        if zero_points != "none":
            b_zp = _bytes(BYTES[b_t], b_shape[-1]) if zero_points == "per_column" else _bytes(BYTES[b_t])
            inputs |= {"a_zp": _bytes(BYTES[a_t]), "b_zp": b_zp}
        check_op("MatMulInteger", inputs, initializers=("b", "b_zp") if weight else ())


@pytest.mark.parametrize(("a_shape", "b_shape"), [((2, 1, 3, 5), (4, 5, 6)), ((3, 7), (2, 7, 4)), ((5,), (5,))])
def test_matmul_integer_broadcasts_batches_as_matmul(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    a, b = _bytes(np.uint8, *a_shape), _bytes(np.int8, *b_shape)
    check_op("MatMulInteger", {"a": a, "b": b, "a_zp": _bytes(np.uint8), "b_zp": _bytes(np.int8)})


def test_uint8_by_int8_is_exact_over_the_full_range() -> None:
    """Full-range uint8 x int8 (where onnxruntime's AVX2 kernel saturates pair sums): Onyxia equals the
    exact integer product, int32 throughout."""
    a = RNG.integers(0, 256, (6, 33)).astype(np.uint8)
    b = RNG.integers(-128, 128, (33, 7)).astype(np.int8)
    a_zp, b_zp = np.array(131, np.uint8), RNG.integers(-128, 128, 7).astype(np.int8)
    model = make_model("MatMulInteger", {"a": a, "b": b, "a_zp": a_zp, "b_zp": b_zp}, initializers=("b", "b_zp"))
    (got,) = onyxia_outputs(model, {"a": a, "a_zp": a_zp})
    exact = (a.astype(np.int64) - int(a_zp)) @ (b.astype(np.int64) - b_zp.astype(np.int64))
    np.testing.assert_array_equal(got, exact.astype(np.int32))


def test_matmul_integer_sums_past_the_int16_range() -> None:
    """255 * 255 * 4096 needs 27 bits: the sums are int32 throughout, like onnxruntime's."""
    a, b = np.full((2, 4096), 255, np.uint8), np.full((4096, 3), 255, np.uint8)
    check_op("MatMulInteger", {"a": a, "b": b}, initializers=("b",))


@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_matmul_integer_to_float(per_column: bool, bias: bool) -> None:
    a, b = _bytes(np.uint8, 3, 20), _bytes(np.int8, 20, 9)
    b_scale = RNG.uniform(1e-3, 1e-1, 9 if per_column else ()).astype(np.float32)
    inputs: dict[str, np.ndarray | None] = {
        "a": a,
        "b": b,
        "a_scale": np.array(0.0371, np.float32),
        "b_scale": b_scale,
        "a_zp": _bytes(np.uint8),
        "b_zp": _bytes(np.int8, 9) if per_column else _bytes(np.int8),
        "bias": RNG.standard_normal(9).astype(np.float32) if bias else None,
    }
    # sum * scale + bias: onnxruntime rounds twice, a GPU may contract the two into one fused multiply-add
    tolerance = EXACT_ON_CPU if bias else EXACT
    check_op("MatMulIntegerToFloat", inputs, domain="com.microsoft", initializers=("b", "b_scale"), tolerance=tolerance)


DQL_CASES = {
    "normal": RNG.standard_normal((3, 40)).astype(np.float32),
    "all_zero": np.zeros((2, 8), np.float32),
    "all_positive": np.abs(RNG.standard_normal(33)).astype(np.float32) + 0.5,
    "all_negative": -np.abs(RNG.standard_normal(33)).astype(np.float32) - 0.5,
    # range [-1, 254]: scale exactly 1, zero point 1, so x / scale lands on halves: ties go to even
    "ties": np.array([-1.0, 0.5, 1.5, 2.5, -0.5, 253.5, 254.0], np.float32),
    "many_strides": (RNG.standard_normal(1000) * 50).astype(np.float32),  # more elements than threads
    "tiny_scale": (RNG.standard_normal(64) * 1e-6).astype(np.float32),
}


@pytest.mark.parametrize("case", sorted(DQL_CASES))
def test_dynamic_quantize_linear(case: str) -> None:
    check_op("DynamicQuantizeLinear", {"x": DQL_CASES[case]}, num_outputs=3, tolerance=EXACT)


def test_dynamic_quantize_linear_folds_as_onnxruntime_computes() -> None:
    """The fold (a constant x) and the numpy reference are onnxruntime's numbers on many random tensors."""
    model = make_model("DynamicQuantizeLinear", {"x": np.zeros(1, np.float32)}, num_outputs=3, dim_params={"x": ["n"]})
    for trial in range(200):
        x = (RNG.standard_normal(RNG.integers(1, 200)) * 10 ** RNG.uniform(-4, 4)).astype(np.float32)
        x = np.abs(x) if trial % 3 == 0 else x
        for got, expected in zip(dynamic_quantize(x), reference_outputs(model, {"x": x}, "ort")):
            np.testing.assert_array_equal(got, expected)
    folded = make_model("DynamicQuantizeLinear", {"x": DQL_CASES["normal"]}, num_outputs=3, initializers=("x",))
    assert not compile_model(folded).operations  # every output is a compile-time value
    for got, expected in zip(onyxia_outputs(folded, {}), reference_outputs(folded, {}, "ort")):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("x_t", [np.uint8, np.int8])
def test_dequantize_linear(x_t: type) -> None:
    x = _bytes(x_t, 4, 6)
    check_op("DequantizeLinear", {"x": x, "s": np.array(0.02, np.float32), "z": _bytes(x_t)}, tolerance=EXACT)
    check_op("DequantizeLinear", {"x": x, "s": np.array(0.5, np.float32)}, tolerance=EXACT)
    per_axis = {"x": x, "s": RNG.uniform(0.01, 1, 4).astype(np.float32), "z": _bytes(x_t, 4)}
    check_op("DequantizeLinear", per_axis, {"axis": 0}, tolerance=EXACT)
    check_op("DequantizeLinear", {"x": x, "s": np.array(0.5, np.float32)}, initializers=("x",), tolerance=EXACT)


def _quantize_dynamic_chain(b_scale: np.ndarray, m: int | str = "m") -> object:
    """What quantize_dynamic emits for one MatMul by a constant weight."""
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "q_scale", "q_zp"]),
        helper.make_node("Mul", ["q_scale", "w_scale"], ["scales"]),
        helper.make_node("MatMulInteger", ["q", "w", "q_zp", "w_zp"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["acc_f"], to=1),
        helper.make_node("Mul", ["acc_f", "scales"], ["y"]),
    ]
    weights = {"w": _bytes(np.int8, 24, 10), "w_scale": b_scale, "w_zp": np.array(0, np.int8)}
    return graph_model(nodes, {"x": (np.float32, [m, 24])}, weights, ["y"])


@pytest.mark.parametrize("per_column", [False, True])
def test_quantize_dynamic_chain_fuses_and_matches_onnxruntime(per_column: bool) -> None:
    b_scale = RNG.uniform(1e-3, 1e-2, 10 if per_column else ()).astype(np.float32)
    model = _quantize_dynamic_chain(b_scale)
    ops = ops_of(compile_model(model, {"m": 1}))
    # MatMulIntegerToFloat, then its DynamicQuantizeLinear folded in (quantized.integer_fusions)
    assert ops == ["DynamicQuantizeMatMul"], ops
    feeds = [{"x": RNG.standard_normal((rows, 24)).astype(np.float32)} for rows in (1, 7)]
    check_fused(model, feeds, {"FuseMatMulBias"}, tolerance=EXACT)


def test_fusion_declines_a_per_row_scale() -> None:
    b = GraphBuilder("per_row")
    q = b.input("q", DataType.UINT8, [3, 8])
    acc = b.op("MatMulInteger", q, b.initializer("w", _bytes(np.uint8, 8, 5)))
    scale = b.op("Mul", b.input("sa", DataType.FLOAT, []), b.input("sb", DataType.FLOAT, [3, 1]))
    b.output(b.op("Mul", b.op("Cast", acc, to=1), scale))
    registry = core_operator_registry()
    ShapeInferencePass().run(b.graph, registry)
    before = str(b.graph)
    result = try_rule(FUSE_CAST_MUL_INTO_MATMUL_INTEGER, b.graph, b.graph.nodes_of("Mul")[-1], registry)
    assert "neither per tensor nor per column" in str(result)
    assert str(b.graph) == before


def test_bad_inputs_are_named() -> None:
    registry = core_operator_registry()
    b = GraphBuilder("per_row_zero_point")
    a = b.input("a", DataType.UINT8, [3, 8])
    b.output(b.op("MatMulInteger", a, b.input("b", DataType.UINT8, [8, 4]), b.input("za", DataType.UINT8, [3])))
    with pytest.raises(UnsupportedOpError, match=r"MatMulInteger.*input 2 \(a_zero_point.*dims \[3\]"):
        ShapeInferencePass().run(b.graph, registry)
    b = GraphBuilder("mixed_zero_point")
    a = b.input("a", DataType.UINT8, [3, 8])
    zb = b.input("zb", DataType.UINT8, [])
    b.output(b.op("MatMulInteger", a, b.input("b", DataType.INT8, [8, 4]), None, zb))
    with pytest.raises(ShapeInferenceError, match=r"input 3 \(b_zero_point\) has dtype uint8; expected int8"):
        ShapeInferencePass().run(b.graph, registry)
    b = GraphBuilder("float_operand")
    b.output(b.op("MatMulInteger", b.input("a", DataType.FLOAT, [3, 8]), b.input("b", DataType.UINT8, [8, 4])))
    with pytest.raises(ShapeInferenceError, match=r"input 0 \(A\) has dtype float; expected uint8 or int8"):
        ShapeInferencePass().run(b.graph, registry)
    b = GraphBuilder("f16_input")
    b.output(*b.op("DynamicQuantizeLinear", b.input("x", DataType.FLOAT16, [4]), _outputs=3))
    with pytest.raises(ShapeInferenceError, match=r"DynamicQuantizeLinear.*float16; expected float32"):
        ShapeInferencePass().run(b.graph, registry)
