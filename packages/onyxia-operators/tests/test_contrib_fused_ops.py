"""com.microsoft FusedMatMul (every trans/transBatch flag, alpha, broadcast batch, vectors),
GemmFastGelu and BiasSplitGelu, lowered by LowerContribOps, against onnxruntime.

onnxruntime has CPU kernels for FusedMatMul only (GemmFastGelu and BiasSplitGelu are CUDA/ROCm
kernels), so those two are compared with onnxruntime running the graph ContribOperators.md defines
them as: MatMul + com.microsoft FastGelu, and Add + Split + Gelu + Mul."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from onnx import helper
from oracle import assert_close, check_op, compile_model, make_model, onyxia_outputs, reference_outputs

from onyxia.core import OnyxiaError

MS = "com.microsoft"
rng = np.random.default_rng(5)


def _f(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _perm(rank: int, trans: int, batch: int) -> list[int]:
    perm = list(range(1, rank - 1)) + [0, rank - 1] if batch else list(range(rank))
    if trans:
        perm[-2], perm[-1] = perm[-1], perm[-2]
    return perm


@pytest.mark.parametrize(("ta", "tba", "tb", "tbb"), list(itertools.product([0, 1], repeat=4)))
def test_fused_matmul_flags(ta: int, tba: int, tb: int, tbb: int) -> None:
    """A [2, 3, 4, 5] under its flags is [.., M, K]; B is shaped so that its flags give [.., K, 6]."""
    a = _f(2, 3, 4, 5)
    effective_a = [a.shape[p] for p in _perm(4, ta, tba)]
    effective_b = [*effective_a[:-2], effective_a[-1], 6]
    perm_b = _perm(4, tb, tbb)
    b = _f(*[effective_b[i] for i in np.argsort(perm_b)])
    attrs = {"transA": ta, "transBatchA": tba, "transB": tb, "transBatchB": tbb, "alpha": 0.5}
    check_op("FusedMatMul", {"a": a, "b": b}, attrs, domain=MS)


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "attrs"),
    [
        ((3, 4), (5, 4), {"transB": 1}),  # the optimizer's MatMul(x, Transpose(w)) with a weight
        ((2, 1, 4, 3), (5, 4, 6), {"transA": 1, "alpha": 2.0}),  # broadcast batch
        ((4,), (4, 6), {}),  # a vector
        ((2, 3, 4), (4,), {"alpha": -1.5}),
    ],
)
def test_fused_matmul_shapes(a_shape: tuple[int, ...], b_shape: tuple[int, ...], attrs: dict) -> None:
    check_op("FusedMatMul", {"a": _f(*a_shape), "b": _f(*b_shape)}, attrs, domain=MS, initializers=["b"])


def _against_spelled_out(op: str, inputs: dict, body: list, dim_params: dict | None = None) -> None:
    """Onyxia on the one-node `op` model; onnxruntime on the same inputs through the nodes `body`
    (which read the inputs by name and write y0)."""
    model = make_model(op, inputs, domain=MS, dim_params=dim_params)
    graph = helper.make_graph(body, "spelled_out", model.graph.input, model.graph.output)
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]
    reference = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    assert_close(onyxia_outputs(model, feeds)[0], reference_outputs(reference, feeds, "ort")[0])


def _gemm_fast_gelu_body(bias: bool) -> list:
    return [
        helper.make_node("MatMul", ["x", "w"], ["product"]),
        helper.make_node("FastGelu", ["product", *(["bias"] if bias else [])], ["y0"], domain=MS),
    ]


def _bias_split_gelu_body(half: int) -> list:
    halves = helper.make_tensor("halves", 7, [2], [half, half])
    return [
        helper.make_node("Add", ["x", "bias"], ["biased"]),
        helper.make_node("Constant", [], ["sizes"], value=halves),
        helper.make_node("Split", ["biased", "sizes"], ["left", "right"], axis=-1),
        helper.make_node("Gelu", ["right"], ["gelu"]),
        helper.make_node("Mul", ["left", "gelu"], ["y0"]),
    ]


@pytest.mark.parametrize("bias", [True, False])
def test_gemm_fast_gelu(bias: bool) -> None:
    inputs = {"x": _f(2, 5, 8), "w": _f(8, 12), "bias": _f(12) if bias else None}
    _against_spelled_out("GemmFastGelu", inputs, _gemm_fast_gelu_body(bias))


def test_bias_split_gelu() -> None:
    _against_spelled_out("BiasSplitGelu", {"x": _f(2, 6, 16), "bias": _f(16)}, _bias_split_gelu_body(8))


def test_symbolic_dims() -> None:
    dims: dict[str, list[int | str]] = {"x": ["batch", "tokens", 16]}
    _against_spelled_out("BiasSplitGelu", {"x": _f(2, 6, 16), "bias": _f(16)}, _bias_split_gelu_body(8), dims)
    inputs = {"x": _f(2, 5, 16), "w": _f(16, 4)}
    _against_spelled_out("GemmFastGelu", inputs, _gemm_fast_gelu_body(False), dims)


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "message"),
    [
        ("FusedMatMul", {"a": _f(3, 4), "b": _f(3, 4)}, {}, "disagree on K"),
        ("FusedMatMul", {"a": _f(4), "b": _f(4, 2)}, {"transA": 1}, "transA/transBatchA need A of rank 2"),
        ("GemmFastGelu", {"x": _f(2, 8), "w": _f(8, 3), "bias": _f(4)}, {}, "bias must be [3]"),
        ("BiasSplitGelu", {"x": _f(2, 3, 5), "bias": _f(5)}, {}, "an even static D"),
        (
            "BiasSplitGelu",
            {"x": _f(2, 3, 4).astype(np.float16), "bias": _f(4)},
            {},
            "input 1 'bias' is float but 'X' is float16",
        ),
    ],
)
def test_refusals_name_the_problem(op: str, inputs: dict, attrs: dict, message: str) -> None:
    with pytest.raises(OnyxiaError, match=re.escape(message)) as info:
        compile_model(make_model(op, inputs, attrs, domain=MS))
    assert op in str(info.value)
