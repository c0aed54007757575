"""The Reduce* family against onnxruntime (onnx.reference where the spec's identity values for
empty reductions differ from onnxruntime): every row, axes as input and as attribute, keepdims,
negative and empty axes, noop_with_empty_axes, ranks 0 to 6, size-0 dims, ints, f16, bool, folding."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_op, check_rebinding, compile_model, make_model

from onyxia.core import DataType, ShapeInferenceError, UnsupportedOpError
from onyxia.operators.reduction import REDUCTION_OPS
from onyxia.operators.typesets import FLOATS

RNG = np.random.default_rng(0)

# (name, first opset with axes as an input) for every op, from the table's opset-range keys
OPS = sorted({(name, since) for (name, since, until) in REDUCTION_OPS if until is None})
NAMES = [name for name, _ in OPS]

# (shape, axes or None, attributes)
CASES = [
    ((3, 4, 5), [1], {}),
    ((3, 4, 5), [-1, 0], {"keepdims": 0}),
    ((3, 4, 5), None, {}),
    ((3, 4, 5), None, {"keepdims": 0}),
    ((2, 3), [], {"noop_with_empty_axes": 1}),
    ((), None, {"keepdims": 0}),
    ((7,), [0], {"keepdims": 0}),
    ((2, 300), [1], {}),
    ((4, 3, 2, 3, 2, 2), [1, 3, 4], {}),
    ((2, 1, 3), [1], {"keepdims": 0}),
]


def _data(op: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        return np.asarray(RNG.integers(-3, 4, shape), dtype)
    if op == "ReduceLogSum":
        return np.asarray(RNG.random(shape) + 0.5, dtype)
    if op == "ReduceProd":
        return np.asarray(RNG.random(shape) * 0.6 + 0.7, dtype)
    return np.asarray(RNG.standard_normal(shape), dtype)


def _inputs(op: str, shape: tuple, axes: list[int] | None, dtype: type = np.float32) -> dict:
    inputs = {"x": _data(op, shape, dtype)}
    if axes is not None:
        inputs["axes"] = np.array(axes, np.int64)
    return inputs


@pytest.mark.parametrize(("shape", "axes", "attrs"), CASES, ids=str)
@pytest.mark.parametrize(("op", "opset"), OPS, ids=str)
def test_reduce_axes_input(op: str, opset: int, shape: tuple, axes: list[int] | None, attrs: dict) -> None:
    check_op(op, _inputs(op, shape, axes), attrs, opset=max(opset, 18), initializers=["axes"])


@pytest.mark.parametrize(("op", "opset"), OPS, ids=str)
def test_reduce_axes_attribute(op: str, opset: int) -> None:
    # the opset before axes became an input
    check_op(op, _inputs(op, (3, 4, 5), None), {"axes": [0, -1], "keepdims": 0}, opset=opset - 1)
    check_op(op, _inputs(op, (3, 4, 5), None), {}, opset=opset - 1)


@pytest.mark.parametrize("op", NAMES)
@pytest.mark.parametrize(("shape", "axes"), [((3, 0, 4), [1]), ((0, 4), [1]), ((2, 0), None)], ids=str)
def test_reduce_size_zero(op: str, shape: tuple, axes: list[int] | None) -> None:
    # onnx.reference holds the spec's identities (-inf for Max, 1 for Prod ...). An empty ReduceMean is
    # undefined by the spec: the reference says NaN, onnxruntime 0, and so does the shader, which returns the
    # sum's identity there rather than 0 / 0 (0 on lavapipe, NaN on an NVIDIA GPU)
    reference = "ort" if op == "ReduceMean" else "onnx"
    check_op(op, _inputs(op, shape, axes), opset=18, initializers=["axes"], reference=reference)


def _supports(op: str, dtype: DataType) -> bool:
    return any(dtype in row.dtypes for (name, _, _), row in REDUCTION_OPS.items() if name == op)


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", [n for n in NAMES if _supports(n, DataType.INT32)])
def test_reduce_integers(op: str, dtype: type) -> None:
    check_op(op, _inputs(op, (3, 4, 5), [1], dtype), opset=18, initializers=["axes"])
    check_op(op, _inputs(op, (3, 40), [-1], dtype), opset=18, initializers=["axes"])


@pytest.mark.parametrize("op", [n for n in NAMES if _supports(n, DataType.FLOAT16)])
def test_reduce_float16(op: str) -> None:
    check_op(op, _inputs(op, (3, 6, 5), [1], np.float16), opset=18, initializers=["axes"])


@pytest.mark.parametrize(("shape", "axes"), [((3, 4, 5), [1]), ((3, 40), [-1]), ((2, 3), None), ((2, 0), [1])], ids=str)
@pytest.mark.parametrize("op", [n for n in NAMES if _supports(n, DataType.BOOL)])
def test_reduce_bool(op: str, shape: tuple, axes: list[int] | None) -> None:
    # opset 20 allows bool in ReduceMax (any) and ReduceMin (all); an empty one is false / true
    inputs = {"x": RNG.random(shape) < (0.9 if op == "ReduceMin" else 0.1)}
    if axes is not None:
        inputs["axes"] = np.array(axes, np.int64)
    check_op(op, inputs, opset=20, initializers=["axes"], reference="onnx" if 0 in shape else "ort")
    check_op(op, inputs, opset=20, initializers=["x", "axes"], reference="onnx")  # folded on the host


@pytest.mark.parametrize(("op", "dims"), [("ReduceMean", ["batch", "seq", 8]), ("ReduceMax", [2, "seq", "hidden"])])
def test_reduce_symbolic_dims_rebind_without_recompiling(op: str, dims: list) -> None:
    model = make_model(op, _inputs(op, (2, 3, 8), [1]), opset=18, initializers=["axes"], dim_params={"x": dims})
    check_rebinding(model, [{"x": _data(op, (2, 3, 8), np.float32)}, {"x": _data(op, (2, 70, 8), np.float32)}])


@pytest.mark.parametrize("op", NAMES)
def test_reduce_folds_constants(op: str) -> None:
    inputs = _inputs(op, (3, 4), [1])
    model = make_model(op, inputs, opset=18, initializers=["x", "axes"])
    assert compile_model(model).dispatch_count == 0
    check_op(op, inputs, opset=18, initializers=["x", "axes"])


def test_reduce_rejects_repeated_axes() -> None:
    model = make_model("ReduceSum", _inputs("ReduceSum", (3, 4), [1, -1]), opset=18, initializers=["axes"])
    with pytest.raises(ShapeInferenceError, match=r"ReduceSum.*axes \[1, -1\] repeat an axis"):
        compile_model(model)


def test_float_only_rows_reject_integers() -> None:
    assert all(row.dtypes == FLOATS for (name, _, _), row in REDUCTION_OPS.items() if name == "ReduceL2")
    model = make_model("ReduceL2", _inputs("ReduceL2", (3, 4), [1], np.int32), opset=18, initializers=["axes"])
    with pytest.raises(UnsupportedOpError, match=r"ReduceL2\): input dtype int32 is not implemented"):
        compile_model(model)
