"""Gemm against onnxruntime: transposes, alpha/beta, every C broadcast, f16, symbolic M, folding, and a Gemm by a
compile-time weight on the tiled product kernel (each matmul variant) or, where that cannot take it, gemm.wgsl."""

import numpy as np
import pytest
from oracle import check_op, compile_model, make_model

from onyxia.core.adapter_facts import force_variants
from onyxia.operators.matmul.variants import FAMILY, VARIANTS

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


@pytest.mark.parametrize("variant", [v.name for v in VARIANTS])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize(("c_shape", "beta"), [(None, 1.0), ((45,), 1.0), ((1, 45), 1.0), ((45,), 0.0)])
def test_gemm_by_a_weight_runs_the_tiled_product(
    variant: str, trans_b: int, c_shape: tuple | None, beta: float
) -> None:
    """A compile-time B (either layout) and a [N] / [1, N] C (or one beta 0 drops) plan MatMulGroup's kernel,
    B in panels, C as its bias; K and N not multiples of 4, M symbolic and past one row tile."""
    inputs = {"a": _m(21, 37), "b": _m(45, 37) if trans_b else _m(37, 45)} | (
        {} if c_shape is None else {"c": _m(*c_shape)}
    )
    constants = ["b"] if c_shape is None else ["b", "c"]
    attrs = {"transB": trans_b, "beta": beta}
    model = make_model("Gemm", inputs, attrs, initializers=constants, dim_params={"a": ["rows", 37]})
    with force_variants({FAMILY: variant}):
        labels = {s.label for s in compile_model(model).shaders}
        check_op("Gemm", inputs, attrs, initializers=constants, dim_params={"a": ["rows", 37]})
    assert labels == {f"matmul/matmul_group@{variant}"}, labels


@pytest.mark.parametrize(
    ("attrs", "c_shape"), [({"alpha": 0.5}, (45,)), ({"transA": 1}, None), ({"beta": 2.0}, (45,)), ({}, (21, 45))]
)
def test_gemm_by_a_weight_the_tiled_product_cannot_take(attrs: dict, c_shape: tuple | None) -> None:
    """alpha, a transposed A, a scaled C or a C of other rows keep gemm.wgsl (B a weight all the same)."""
    a = _m(37, 21) if attrs.get("transA") else _m(21, 37)
    inputs = {"a": a, "b": _m(37, 45)} | ({} if c_shape is None else {"c": _m(*c_shape)})
    constants = ["b"] if c_shape is None else ["b", "c"]
    labels = {s.label for s in compile_model(make_model("Gemm", inputs, attrs, initializers=constants)).shaders}
    assert labels == {"matmul/gemm"}, labels
    check_op("Gemm", inputs, attrs, initializers=constants)
