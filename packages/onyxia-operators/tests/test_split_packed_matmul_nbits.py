"""GroupMatMuls' split_packed_matmul_nbits: genai int4's packed qkv_proj (one MatMulNBits, then a last-axis Split)
as MatMulNBits siblings that group into one MatMulNBitsGroup; outputs against onnxruntime and, bit for bit, the
plan without the pass; the declines with their reasons."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import compile_model
from test_matmulnbits_ort import F32_TOLERANCE, INT8_TOLERANCE, quantized_weights

from onyxia.compiler import ShapeInferencePass
from onyxia.core.rewrite import Decline
from onyxia.core.rewrite.engine import try_rule
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry
from onyxia.operators.quantized.split_fusions import SPLIT_PACKED_MATMUL_NBITS

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(23)
K, N = 64, 48  # q 32, k 8, v 8


def _model(
    zero_points: str = "none", *, bias: bool = False, level: int = 0, sizes: tuple = (32, 8, 8), axis: int = -1
) -> onnx.ModelProto:
    weights = quantized_weights(K, N, 32, zero_points, np.float32, seed=3)
    names = ["A", "B", "scales", "zero_points" if zero_points != "none" else "", "", "bias" if bias else ""]
    if bias:
        weights["bias"] = np.linspace(-1, 1, N).astype(np.float32)
    while names[-1] == "":
        names.pop()
    attrs = {"K": K, "N": N, "bits": 4, "block_size": 32, "accuracy_level": level}
    nodes = [
        helper.make_node("MatMulNBits", names, ["qkv"], domain="com.microsoft", **attrs),
        helper.make_node("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=axis),
    ]
    weights["sizes"] = np.asarray(sizes, np.int64)
    return graph_model(nodes, {"A": (np.float32, ["batch", "seq", K])}, weights, ["q", "k", "v"])


@pytest.mark.parametrize(
    ("zero_points", "bias", "level"),
    [("none", False, 0), ("packed", False, 0), ("float", True, 0), ("packed", True, 4), ("packed", False, 4)],
    ids=["plain", "packed-zero-points", "float-zero-points-bias", "bias-int8-activations", "int8-activations"],
)
def test_packed_qkv_becomes_one_group_and_matches_onnxruntime(zero_points: str, bias: bool, level: int) -> None:
    """With bias a weight takes one more binding, so three do not fit one group: two group, one stays alone."""
    model = _model(zero_points, bias=bias, level=level)
    assert ops_of(compile_model(model)) == (["MatMulNBitsGroup", "MatMulNBits"] if bias else ["MatMulNBitsGroup"])
    feeds = [{"A": RNG.standard_normal((1, n, K)).astype(np.float32)} for n in (1, 4)]
    tolerance = INT8_TOLERANCE if level == 4 and zero_points != "float" else F32_TOLERANCE
    check_fused(model, feeds, {"GroupMatMuls"}, tolerance=tolerance)


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (lambda: _model(axis=1, sizes=(1, 1, 1)), "'Split_1' splits axis 1, not the last axis"),
        (lambda: _model(sizes=(48, 0, 0)), "'Split_1' splits 48 columns into [48, 0, 0] for 3 outputs"),
    ],
    ids=["other-axis", "empty-part"],
)
def test_declines(model: Callable[[], onnx.ModelProto], reason: str, tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save_model(model(), path)
    graph = load_and_parse_model(path)
    ShapeInferencePass().run(graph, REGISTRY)
    product = next(n for n in graph.nodes if n.op_type == "MatMulNBits")
    decline = try_rule(SPLIT_PACKED_MATMUL_NBITS, graph, product, REGISTRY)
    assert isinstance(decline, Decline) and decline.reason == reason
