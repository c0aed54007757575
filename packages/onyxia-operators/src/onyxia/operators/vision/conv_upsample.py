"""ConvTranspose with kernel == stride as a pointwise Conv and a DepthToSpace: the U-Net / FPN 2x upsampler.

With ``k == s`` and no pads each output pixel comes from exactly one input pixel, so the op is a 1 x 1 Conv to
``M * s * s`` channels followed by ``DepthToSpace``: the tiled pointwise GEMM kernel instead of the direct
one, which for a ConvTranspose visits all ``k * k`` taps per output to use ``(k / s)^2`` of them (PP-OCRv4 det:
its two 2 x 2 stride-2 upsamplers were 29% of its GPU time). The lowering waits while a fold (conv_folds.py)
can still reach the ConvTranspose, and an activation behind the DepthToSpace moves in front of it (conv_axes.py),
where the conv epilogue takes it (conv_fusion.py).

Declines (reason logged, graph unchanged): a ConvTranspose that is not 2-D float32 with constant weights, whose
kernel differs from its strides or is not square, with groups, dilations, pads, output padding or an output
shape.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, IrGraph
from onyxia.core.rewrite import Decline, Match, Rewriter, Rule, Var, op
from onyxia.core.rewrite.rewriter import NewValue
from onyxia.operators.vision.conv_folds import initializer, known, pending_fold

__all__ = ["CONV_UPSAMPLE"]


def _transpose_check(graph: IrGraph, m: Match) -> Decline | None:
    node, y = m.node, m.node.outputs[0]
    w = known(graph, node.inputs[1])
    a = node.attributes
    if y is None or w is None or w.ndim != 4 or graph.tensor(y).dtype != DataType.FLOAT:
        return Decline("a 2-D float32 ConvTranspose with constant weights is needed", node)
    k = list(w.shape[2:])
    plain = {
        "kernel equals strides": list(a.get("strides", [1, 1])) == k and k[0] == k[1] and k[0] > 1,
        "no groups": int(a.get("group", 1)) == 1,
        "no dilations": set(a.get("dilations", [1])) == {1},
        "no pads": not any(a.get("pads", [0])) and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID"),
        "no output padding or shape": not any(a.get("output_padding", [0])) and "output_shape" not in a,
        "a bias known at compile time": len(node.inputs) < 3
        or node.inputs[2] is None
        or known(graph, node.inputs[2]) is not None,
    }
    missing = [need for need, ok in plain.items() if not ok]
    if missing:
        return Decline(f"the lowering needs {', '.join(missing)}", node)
    if not graph.tensor_consumers(y) or pending_fold(graph, y):
        return Decline("dead, or a BatchNormalization or per-channel op folds into it first", node)
    return None


def _lower_transpose(r: Rewriter, m: Match) -> list[NewValue]:
    graph, node = r.graph, m.node
    w = known(graph, node.inputs[1])
    assert w is not None
    c, mo, s = w.shape[0], w.shape[1], w.shape[2]
    bias_in = node.inputs[2] if len(node.inputs) > 2 else None
    bias = known(graph, bias_in) if bias_in is not None else np.zeros(mo, np.float32)
    assert bias is not None
    # output channel (i * s + j) * M + m of the 1 x 1 conv is DepthToSpace's pixel (i, j) of channel m in DCR
    # order, the mode every opset has (CRD came with opset 11)
    w2 = w.transpose(2, 3, 1, 0).reshape(s * s * mo, c, 1, 1)
    b2 = np.tile(bias.astype(np.float32), s * s)
    inputs = (initializer(graph, f"{node.name}/pointwise_w", w2), initializer(graph, f"{node.name}/pointwise_b", b2))
    conv = r.op("Conv", node.inputs[0], *inputs, kernel_shape=[1, 1], name=f"{node.name}/pointwise")
    return [r.op("DepthToSpace", conv, blocksize=int(s), name=node.name)]


CONV_UPSAMPLE: tuple[Rule, ...] = (
    Rule(
        "ConvTranspose_k_eq_s_as_pointwise_Conv",
        op.ConvTranspose(Var("x"), Var("w"), _extra_inputs=True),
        _lower_transpose,
        check=_transpose_check,
        targets="PP-OCR det / U-Net 2 x 2 stride-2 upsamplers",
    ),
)
