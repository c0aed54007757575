"""Gemm against onnxruntime: transposes, alpha/beta, every C broadcast, f16, symbolic M, folding."""

import numpy as np
import pytest
from oracle import check_op

RNG = np.random.default_rng(11)


def _m(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (), (7,), (1, 7), (5, 1), (5, 7)])
def test_gemm(trans_a: int, trans_b: int, c_shape: tuple | None) -> None:
    a = _m(6, 5) if trans_a else _m(5, 6)
    b = _m(7, 6) if trans_b else _m(6, 7)
    inputs = {"a": a, "b": b} | ({} if c_shape is None else {"c": _m(*c_shape)})
    check_op("Gemm", inputs, {"transA": trans_a, "transB": trans_b, "alpha": 0.5, "beta": 2.0})


def test_gemm_f16_and_symbolic_rows() -> None:
    check_op("Gemm", {"a": _m(3, 8, dtype=np.float16), "b": _m(8, 4, dtype=np.float16)}, {})
    check_op("Gemm", {"a": _m(9, 8), "b": _m(4, 8), "c": _m(4)}, {"transB": 1}, dim_params={"a": ["batch", 8]})


def test_gemm_folds_on_constants() -> None:
    check_op("Gemm", {"a": _m(2, 3), "b": _m(3, 2), "c": _m(2)}, {"beta": 0.5}, initializers=["a", "b", "c"])
