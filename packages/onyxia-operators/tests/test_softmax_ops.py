"""Softmax and LogSoftmax against onnxruntime, in both axis conventions (opset 13+: one axis;
before: coerced to 2-D at `axis`), with f16, size-0 dims, long rows, symbolic dims and folding."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_op, check_rebinding, compile_model, make_model

from onyxia.onnx.errors import ModelValidationError
from onyxia.operators.reduction import SoftmaxOp
from onyxia.operators.reduction.softmax import SOFTMAX_OPS

RNG = np.random.default_rng(0)

# one row per (op, opset range): the opset the test runs at is the range's first
ROWS = sorted({(name, since) for (name, since, _) in SOFTMAX_OPS})

# (shape, axis or None for the default)
CASES = [
    ((3, 5), None),
    ((2, 3, 4), 1),
    ((2, 3, 4), 0),
    ((2, 3, 4), -1),
    ((7,), 0),
    ((2, 3, 1, 2, 2, 3), 2),
    ((2, 1000), -1),
    ((2, 32, 150), 1),  # a row per invocation (ROW_LANES), strided, 300 rows over several workgroups
    ((2, 65, 9), 1),  # just past ROW_LANES: a workgroup per row
    ((3, 0, 4), 1),
    ((0, 4), -1),
]


def _x(shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    return np.asarray(RNG.standard_normal(shape) * 3, dtype)


@pytest.mark.parametrize(("shape", "axis"), CASES, ids=str)
@pytest.mark.parametrize(("op", "opset"), ROWS, ids=str)
def test_softmax(op: str, opset: int, shape: tuple, axis: int | None) -> None:
    attrs = {} if axis is None else {"axis": axis}
    check_op(op, {"x": _x(shape)}, attrs, opset=max(opset, 11))


@pytest.mark.parametrize(("op", "opset"), ROWS, ids=str)
def test_softmax_float16(op: str, opset: int) -> None:
    check_op(op, {"x": _x((4, 37), np.float16)}, opset=max(opset, 11))


def test_softmax_large_values_stay_finite() -> None:
    # exp(1000) overflows f32: only the max-shifted form survives
    x = np.asarray([[1000.0, 999.0, -1000.0], [-50.0, 0.0, 50.0]], np.float32)
    check_op("Softmax", {"x": x}, opset=13)
    check_op("LogSoftmax", {"x": x}, opset=13)


@pytest.mark.parametrize(
    ("op", "opset", "axis", "dims"),
    [
        ("Softmax", 13, -1, ["batch", 3, "seq"]),
        ("Softmax", 13, 1, ["batch", 3, "seq"]),
        ("LogSoftmax", 11, 1, [2, "heads", "seq"]),
    ],
    ids=str,
)
def test_softmax_symbolic_dims_rebind_without_recompiling(op: str, opset: int, axis: int, dims: list) -> None:
    model = make_model(op, {"x": _x((2, 3, 1))}, {"axis": axis}, opset=opset, dim_params={"x": dims})
    check_rebinding(model, [{"x": _x((2, 3, 1))}, {"x": _x((2, 3, 65))}])


@pytest.mark.parametrize(("op", "opset"), ROWS, ids=str)
def test_softmax_folds_constants(op: str, opset: int) -> None:
    inputs = {"x": _x((3, 4))}
    assert compile_model(make_model(op, inputs, opset=max(opset, 11), initializers=["x"])).dispatch_count == 0
    check_op(op, inputs, opset=max(opset, 11), initializers=["x"])


def test_softmax_rejects_out_of_range_axis() -> None:
    assert isinstance(SOFTMAX_OPS[("Softmax", 13, None)], SoftmaxOp)
    with pytest.raises(ModelValidationError, match=r"Softmax.*'axis' must be in \[-3 , 2\]"):
        compile_model(make_model("Softmax", {"x": _x((2, 3, 4))}, {"axis": 3}, opset=13))
