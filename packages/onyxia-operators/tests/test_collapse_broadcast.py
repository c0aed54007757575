"""`layout.collapse_broadcast`: the broadcasting kernels index over the fewest axes their inputs allow.

Each output axis costs a broadcasting kernel a division per element, and a division by a symbolic dim (an
image's H or W left open) a scalar divide per lane on lavapipe; merging the axes every input reads alike keeps
an open-dims plan near the static one's speed. The merged strides must address the same elements: checked
against onnxruntime at several sizes of one plan, on the fused chain and on the plain binary kernel.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_rebinding, compile_model

from onyxia.core.symbolic import SymbolicExpr
from onyxia.operators.layout import collapse_broadcast

RNG = np.random.default_rng(5)
H, W = SymbolicExpr.name("h"), SymbolicExpr.name("w")


@pytest.mark.parametrize(
    ("ins", "out", "axes", "strides"),
    [
        ([[1, 4, H, W], [4, 1, 1]], [1, 4, H, W], [4, H * W], [[H * W, 1], [1, 0]]),  # a BatchNorm's scale
        ([[2, 3], [3]], [2, 3], [2, 3], [[3, 1], [0, 1]]),  # a row: nothing to merge
        ([[2, 1, 3], [1, 5, 3]], [2, 5, 3], [2, 5, 3], [[3, 0, 1], [0, 3, 1]]),
        ([[6, 1, 1, 2], [6, 7, 5, 2]], [6, 7, 5, 2], [6, 35, 2], [[2, 0, 1], [70, 2, 1]]),
        ([[1, 1], [1]], [1, 1], [1], [[0], [0]]),  # one element
    ],
)
def test_collapse(ins: list, out: list, axes: list, strides: list) -> None:
    assert collapse_broadcast(ins, out) == (axes, strides)


def test_an_input_dim_neither_the_extent_nor_one_leaves_the_axes() -> None:
    """A symbolic dim of another name may be 1 at run time (broadcast then): nothing is merged on a guess."""
    a = SymbolicExpr.name("a")
    axes, strides = collapse_broadcast([[a, 3], [H, 3]], [H, 3])
    assert axes == [H, 3] and strides[1] == [3, 1]


def _batch_norm_like(fused: bool) -> onnx.ModelProto:
    """``Relu(x * s + b)`` over [n, 4, h, w] with s and b [4, 1, 1]; `fused` False: one Add alone."""
    consts = [numpy_helper.from_array(RNG.standard_normal((4, 1, 1)).astype(np.float32), name) for name in ("s", "b")]
    nodes = [helper.make_node("Add", ["x", "b"], ["y"])]
    if fused:
        nodes = [
            helper.make_node("Mul", ["x", "s"], ["t"]),
            helper.make_node("Add", ["t", "b"], ["u"]),
            helper.make_node("Relu", ["u"], ["y"]),
        ]
    graph = helper.make_graph(
        nodes,
        "bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        consts if fused else consts[1:],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "binary"])
def test_merged_axes_match_onnxruntime_at_every_size(fused: bool) -> None:
    model = _batch_norm_like(fused)
    (shader,) = compile_model(model).shaders
    assert "array<u32, 3>(" in shader.source  # n, 4 and h * w: three axes, not four
    sizes = [{"x": RNG.standard_normal(shape).astype(np.float32)} for shape in ((1, 4, 5, 7), (3, 4, 2, 9))]
    check_rebinding(model, sizes)
