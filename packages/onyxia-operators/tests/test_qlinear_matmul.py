"""QLinearMatMul (opset 10 and 21) and com.microsoft QGemm against onnxruntime, integer outputs bit for bit:
uint8/int8 operands, per-tensor and per-column b scales and zero points, batches and 1-D operands, QGemm's
transA/transB, alpha, int32 C and float output; a per-row a (the spec allows it, onnxruntime refuses it)
against the ONNX reference; malformed inputs are named."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_op

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, ShapeInferenceError, UnsupportedOpError
from onyxia.operators import core_operator_registry

RNG = np.random.default_rng(16)
EXACT = (0.0, 0.0)
# (A, B, Y) dtypes onnxruntime registers: uint8 A with either B, or int8 throughout
COMBOS = {"u8u8": (np.uint8, np.uint8, np.uint8), "u8s8": (np.uint8, np.int8, np.uint8), "s8s8": (np.int8,) * 3}


def q(dtype: type, *shape: int, narrow: bool = False) -> np.ndarray:
    """Random bytes; with `narrow`, int8 ones in [-64, 63]: onnxruntime's uint8 x int8 kernel on AVX2 without
    VNNI saturates pairwise sums of products (vpmaddubsw), so it is exact only for such operands."""
    info = np.iinfo(dtype)
    low, high = (-64, 63) if narrow and dtype == np.int8 else (info.min, info.max)
    return RNG.integers(low, high + 1, shape).astype(dtype)


def scale(*shape: int) -> np.ndarray:
    return RNG.uniform(0.002, 0.05, shape).astype(np.float32)


def qlinear_inputs(combo: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], per_column: bool) -> dict:
    a_t, b_t, y_t = COMBOS[combo]
    narrow = combo == "u8s8"
    n = b_shape[-1] if len(b_shape) > 1 else 1
    column = (*b_shape[:-2], 1, n) if len(b_shape) > 1 else (1,)  # onnxruntime's form: B's batch, then [1, N]
    return {
        "a": q(a_t, *a_shape),
        "a_scale": scale(),
        "a_zp": q(a_t),
        "b": q(b_t, *b_shape, narrow=narrow),
        "b_scale": scale(*column) if per_column else scale(),
        "b_zp": q(b_t, *column, narrow=narrow) if per_column else q(b_t, narrow=narrow),
        "y_scale": np.array(0.08, np.float32),
        "y_zp": q(y_t),
    }


SHAPES = [((1, 64), (64, 16)), ((3, 13), (13, 7)), ((2, 3, 4, 9), (9, 6)), ((2, 1, 3, 5), (4, 5, 6)), ((6,), (6, 5))]


@pytest.mark.parametrize("combo", sorted(COMBOS))
@pytest.mark.parametrize("per_column", [False, True], ids=["per_tensor", "per_column"])
@pytest.mark.parametrize("opset", [10, 21])
def test_qlinear_matmul(combo: str, per_column: bool, opset: int) -> None:
    for a_shape, b_shape in SHAPES:
        inputs = qlinear_inputs(combo, a_shape, b_shape, per_column)
        check_op("QLinearMatMul", inputs, opset=opset)


@pytest.mark.parametrize("combo", ["u8u8", "s8s8"])
def test_qlinear_matmul_full_range_with_constant_weight(combo: str) -> None:
    """Full-range operands (onnxruntime is exact for these combinations) and a weight known at compile time."""
    inputs = qlinear_inputs(combo, (5, 40), (40, 9), per_column=True)
    check_op("QLinearMatMul", inputs, initializers=("b", "b_scale", "b_zp"))


def test_qlinear_matmul_saturates_and_rounds_ties() -> None:
    """A tiny y_scale drives most outputs to the range's ends; a y_scale of a_scale * b_scale / 0.5 puts every
    product on a half, where onnxruntime rounds to even."""
    inputs = qlinear_inputs("u8u8", (4, 12), (12, 5), per_column=False)
    check_op("QLinearMatMul", inputs | {"y_scale": np.array(1e-4, np.float32)})
    halves = inputs | {"a_scale": np.array(0.25, np.float32), "b_scale": np.array(0.5, np.float32)}
    check_op("QLinearMatMul", halves | {"y_scale": np.array(0.25, np.float32)})


def test_qlinear_matmul_per_row_a_matches_the_onnx_reference() -> None:
    """Opset 21's per-row a ([M, 1]): onnxruntime refuses it, so the reference is ONNX's evaluator."""
    inputs = qlinear_inputs("u8u8", (4, 10), (10, 3), per_column=True)
    inputs |= {"a_scale": scale(4, 1), "a_zp": q(np.uint8, 4, 1)}
    check_op("QLinearMatMul", inputs, reference="onnx", tolerance=None)


@pytest.mark.parametrize("combo", sorted(COMBOS))
@pytest.mark.parametrize(("trans_a", "trans_b"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_qgemm_requantized(combo: str, trans_a: int, trans_b: int) -> None:
    m, k, n = 5, 11, 7
    inputs = qlinear_inputs(combo, (k, m) if trans_a else (m, k), (n, k) if trans_b else (k, n), per_column=False)
    inputs |= {"b_scale": scale(n), "b_zp": q(COMBOS[combo][1], n, narrow=combo == "u8s8")}
    y_scale, y_zp = inputs.pop("y_scale"), inputs.pop("y_zp")
    for c in (None, RNG.integers(-500, 500, n).astype(np.int32), RNG.integers(-500, 500, (m, n)).astype(np.int32)):
        attrs = {"transA": trans_a, "transB": trans_b, "alpha": 0.75}
        check_op("QGemm", inputs | {"c": c, "y_scale": y_scale, "y_zp": y_zp}, attrs, domain="com.microsoft")


@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm_float_output(per_column: bool) -> None:
    """Without y_scale and y_zero_point QGemm stores f32(sum) * (alpha * a_scale * b_scale): exact products."""
    inputs = qlinear_inputs("u8s8", (6, 17), (17, 8), per_column=False)
    del inputs["y_scale"], inputs["y_zp"]
    if per_column:
        inputs |= {"b_scale": scale(8), "b_zp": q(np.int8, 8, narrow=True)}
    inputs["c"] = RNG.integers(-1000, 1000, (1, 8)).astype(np.int32)
    check_op("QGemm", inputs, {"alpha": 2.0}, domain="com.microsoft", tolerance=EXACT)


def _graph(op: str, **shapes: tuple[DataType, list[int]]) -> GraphBuilder:
    b = GraphBuilder(op)
    b.output(b.op(op, *(b.input(name, dtype, dims) for name, (dtype, dims) in shapes.items())))
    return b


def test_bad_inputs_are_named() -> None:
    registry = core_operator_registry()
    u8, f32 = DataType.UINT8, DataType.FLOAT
    base = {"a": (u8, [3, 8]), "sa": (f32, []), "za": (u8, []), "b": (u8, [8, 4]), "sb": (f32, [])}
    cases = [
        (
            {"zb": (DataType.INT8, []), "sy": (f32, []), "zy": (u8, [])},
            ShapeInferenceError,
            r"input 5 .*int8; expected uint8",
        ),
        (
            {"zb": (u8, [3]), "sy": (f32, []), "zy": (u8, [])},
            UnsupportedOpError,
            r"input 5 \(b_zero_point\) has dims \[3\]",
        ),
        ({"zb": (u8, []), "sy": (f32, [2]), "zy": (u8, [])}, UnsupportedOpError, r"input 6 \(y_scale\).*one element"),
        (
            {"zb": (u8, []), "sy": (f32, []), "zy": (DataType.INT32, [])},
            ShapeInferenceError,
            r"input 7 \(y_zero_point\)",
        ),
    ]
    for extra, error, message in cases:
        b = _graph("QLinearMatMul", **base, **extra)
        with pytest.raises(error, match=message):
            ShapeInferencePass().run(b.graph, registry)
    b = _graph("QLinearMatMul", **(base | {"b": (u8, [7, 4])}), zb=(u8, []), sy=(f32, []), zy=(u8, []))
    with pytest.raises(ShapeInferenceError, match=r"QLinearMatMul.*K = 8"):
        ShapeInferencePass().run(b.graph, registry)
