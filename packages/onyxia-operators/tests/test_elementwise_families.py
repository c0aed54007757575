"""The family tables drive the test tables: adding a row adds its tests."""

import numpy as np
import pytest
from oracle import check_op

from onyxia.core import DataType
from onyxia.operators.elementwise import BINARY, UNARY, VARIADIC
from onyxia.operators.typesets import BOOL, FLOATS

RNG = np.random.default_rng(0)

# (a shape, b shape): broadcasting, scalars, size-0 dims, ranks 0 to 6
BROADCAST_SHAPES = [
    ((2, 3), (2, 3)),
    ((2, 3, 4), (4,)),
    ((2, 1, 4), (3, 1)),
    ((), (5,)),
    ((), ()),
    ((0, 3), (3,)),
    ((2, 1, 3, 1, 2, 1), (1, 2, 1, 3, 1, 2)),
]


def _data(op: str, dtype: np.dtype, shape: tuple[int, ...], role: str) -> np.ndarray:
    if dtype == np.bool_:
        return np.asarray(RNG.random(shape) > 0.5)
    if np.issubdtype(dtype, np.integer):
        low = 1 if role == "b" and op in ("Div", "Mod") else (-5 if np.issubdtype(dtype, np.signedinteger) else 0)
        high = 4 if op == "Pow" else 9
        values = RNG.integers(max(low, 0) if op == "Pow" and role == "b" else low, high, shape)
        if role == "b" and op in ("Div", "Mod"):
            values = values * RNG.choice([-1, 1], shape) if np.issubdtype(dtype, np.signedinteger) else values
        return np.asarray(values).astype(dtype)
    values = RNG.standard_normal(shape) * 2
    if op in ("Sqrt", "Log"):
        values = np.abs(values) + 0.1
    if op in ("Div", "Mod", "Reciprocal") and role in ("b", "x"):
        values = np.where(np.abs(values) < 0.2, 0.5, values)
    return np.asarray(values).astype(dtype)


def _binary_dtypes(op: str) -> list[np.dtype]:
    row = BINARY[op]
    if row.dtypes == BOOL:
        return [np.dtype(np.bool_)]
    candidates = [np.float32, np.float16, np.int64, np.int32]
    return [np.dtype(d) for d in candidates if any(np.dtype(d) == t.numpy for t in row.dtypes)]


BINARY_CASES = [
    (op, dtype, shapes)
    for op in sorted(BINARY)
    if op not in ("Where", "PRelu", "BitShift")  # one-way slope broadcast; opset 28: test_elementwise_math.py
    for dtype in _binary_dtypes(op)
    for shapes in (BROADCAST_SHAPES if dtype == np.float32 else BROADCAST_SHAPES[1:3])
]


@pytest.mark.parametrize(("op", "dtype", "shapes"), BINARY_CASES, ids=str)
def test_binary_matches_onnxruntime(op: str, dtype: np.dtype, shapes: tuple) -> None:
    a, b = _data(op, dtype, shapes[0], "a"), _data(op, dtype, shapes[1], "b")
    attrs = {"fmod": 1} if op == "Mod" and dtype in (np.float32, np.float16) else {}
    check_op(op, {"a": a, "b": b}, attrs, reference="onnx" if op in ("Pow", "Mod") else "ort")


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=str)
def test_where_broadcasts_three_inputs(shapes: tuple) -> None:
    cond = np.asarray(RNG.random(shapes[0]) > 0.5)
    x = RNG.standard_normal(shapes[1]).astype(np.float32)
    check_op("Where", {"c": cond, "x": x, "y": np.float32(7.0) * np.ones((1,), np.float32)})


def _unary_dtypes(op: str) -> list[np.dtype]:
    """The dtypes a row is tested in, its main one first: float32 where the row takes it, else its first
    integer type; float16 and int32 as well where it takes them; and for an integer-only row the 8- and
    16-bit types it takes, whose values live widened in 32 bits on the GPU and must stay masked."""
    row = UNARY[op]
    if row.dtypes == BOOL:
        return [np.dtype(np.bool_)]
    takes = {np.dtype(t.numpy) for t in row.dtypes}
    out = [np.dtype(d) for d in (np.float32, np.int32, np.int64, np.uint32) if np.dtype(d) in takes][:1]
    if DataType.FLOAT16 in row.dtypes and op not in ("Erf", "Softplus", "Celu"):  # onnxruntime: float-only Celu
        out.append(np.dtype(np.float16))
    if np.dtype(np.int32) in takes and np.dtype(np.int32) not in out:
        out.append(np.dtype(np.int32))
    if not row.dtypes & FLOATS:
        out += [np.dtype(d) for d in (np.uint8, np.int8, np.uint16) if np.dtype(d) in takes]
    return out


UNARY_CASES = [
    (op, dtype, shape)
    for op in sorted(UNARY)
    if op != "Clip"
    for dtype in _unary_dtypes(op)
    for shape in ([(3, 4), (), (0, 2), (2, 1, 2, 1, 2, 3)] if dtype == _unary_dtypes(op)[0] else [(5, 7)])
]


def test_integer_only_rows_are_tested_in_integer_dtypes() -> None:
    """A row without float dtypes (BitwiseNot) gets integer cases only, its widened 8/16-bit types included."""
    integer_only = [op for op in UNARY if UNARY[op].dtypes and not UNARY[op].dtypes & (FLOATS | BOOL)]
    assert integer_only, "the family has an integer-only row"
    for op in integer_only:
        dtypes = {d for case_op, d, _ in UNARY_CASES if case_op == op}
        assert dtypes and all(np.issubdtype(d, np.integer) for d in dtypes), (op, dtypes)
        assert np.dtype(np.uint8) in dtypes, op


@pytest.mark.parametrize(("op", "dtype", "shape"), UNARY_CASES, ids=str)
def test_unary_matches_onnxruntime(op: str, dtype: np.dtype, shape: tuple) -> None:
    attrs = {"approximate": "tanh"} if op == "Gelu" and shape == (3, 4) else {}
    reference = "onnx" if op in ("Gelu", "Softplus") and dtype == np.float16 else "ort"
    check_op(op, {"x": _data(op, dtype, shape, "x")}, attrs, opset=21, reference=reference)


def test_unary_with_special_values() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 0.5], np.float32)
    # NaN stays NaN through Relu and HardSigmoid, as in onnxruntime, though WGSL's max and min (which a GPU's
    # compiler may make of a compare and select) drop it
    ops = ("IsNaN", "Tanh", "Sigmoid", "Relu", "HardSigmoid", "Abs", "Floor", "Round", "Sign", "Exp", "Sqrt", "Erf")
    for op in (*ops, "Gelu"):
        check_op(op, {"x": x})
    # WGSL only bounds cos/sin error on [-pi, pi]; large arguments are checked where WGSL is precise
    angles = np.array([np.nan, 0.0, -3.0, 3.1, 100.0], np.float32)
    for op in ("Cos", "Sin"):
        check_op(op, {"x": angles})


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_clip_with_constant_bounds(dtype: type) -> None:
    x = _data("Clip", np.dtype(dtype), (4, 5), "x")
    lo, hi = np.array(-1, dtype), np.array(2, dtype)
    check_op("Clip", {"x": x, "lo": lo, "hi": hi}, initializers=["lo", "hi"])
    check_op("Clip", {"x": x, "lo": lo}, initializers=["lo"])


@pytest.mark.parametrize("op", sorted(VARIADIC))
@pytest.mark.parametrize("count", [1, 2, 3])
def test_variadic(op: str, count: int) -> None:
    shapes = [(2, 3, 4), (3, 1), (4,)][:count]
    inputs = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    check_op(op, inputs)


def test_symbolic_dims() -> None:
    a = RNG.standard_normal((3, 5)).astype(np.float32)
    b = RNG.standard_normal((5,)).astype(np.float32)
    check_op("Add", {"a": a, "b": b}, dim_params={"a": ["batch", 5]})
    check_op("Cos", {"x": a}, dim_params={"x": ["batch", "width"]})
    check_op("Mul", {"a": a, "b": a}, dim_params={"a": ["n", "m"], "b": ["n", "m"]})
