"""`FuseRmsNormIntoRotary`: a per-head RMSNorm before RotaryEmbedding becomes com.onyxia ``RmsNormRotary``.

Gemma 3 (and Qwen 3) normalise q and k per head before RoPE; the onnx-community export writes it as
``Reshape(x, [0, -1, head]) -> SimplifiedLayerNormalization -> Reshape(back) -> RotaryEmbedding``: two
dispatches per tensor, four per layer. RmsNormRotary does both in one, so q and k cost two.

Why not fold the rotation into GroupQueryAttention (do_rotary=1)? GQA's rotary derives each token's
position from seqlens_k (past length + i); com.microsoft RotaryEmbedding reads explicit position_ids. They
agree for the onnx-community decoders only under the session's convention (position_ids = past .. past +
S - 1, no padding), which the graph cannot prove: left padding, packed sequences or any caller-chosen ids
would change the result. RmsNormRotary keeps RotaryEmbedding's inputs and position semantics exactly.

Matches RotaryEmbedding(x2) where x2 = Reshape(n), n = SimplifiedLayerNormalization or RMSNormalization
(x1, scale) over the last axis, x1 = Reshape(x), with each intermediate read only by the next (not a graph
output, no other output of the norm used); the norm in x's dtype, or (the float16 exports) in float32
between ``Cast(to=float)`` and a Cast back to x's dtype, which RmsNormRotary's rounding reproduces. Declines (reason logged, graph unchanged) when the norm's rows
are not the rotation's heads (last dim of x1 != RotaryEmbedding's head size, or the scale is not one head
long), when x2 is not x's shape (the second Reshape is then more than an undo), or for 4-D rotary input.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.normalization import LAYER_NORMS
from onyxia.operators.normalization.rotary import rotary_head_size
from onyxia.operators.passes.rewrite import Decline, Match, RewritePass, Rule, is_folded, producer, sole_use

__all__ = ["FuseRmsNormIntoRotary", "RMS_NORM_ROTARY_RULES"]

_MICROSOFT = "com.microsoft"
_NORMS = ("SimplifiedLayerNormalization", "RMSNormalization")
_ROTARY_ATTRS = ("interleaved", "num_heads", "rotary_embedding_dim")


def _match(graph: IrGraph, rotary: IrNode) -> Match | Decline | None:
    if is_folded(graph, rotary) or len(rotary.inputs) != 4 or None in rotary.inputs:
        return None
    unshape = producer(graph, rotary.inputs[0], ("Reshape",))
    narrow = None if unshape is None else producer(graph, unshape.inputs[0], ("Cast",))
    norm = None if unshape is None else producer(graph, (narrow or unshape).inputs[0], _NORMS)
    widen = None if norm is None else producer(graph, norm.inputs[0], ("Cast",))
    reshape = None if norm is None else producer(graph, (widen or norm).inputs[0], ("Reshape",))
    if reshape is None or len(norm.inputs) < 2 or norm.inputs[1] is None:  # type: ignore[union-attr]
        return None
    chain = [n for n in (unshape, narrow, norm, widen, reshape) if n is not None]  # consumers first
    for node in chain:
        if sole_use(graph, node.outputs[0]) is None:  # type: ignore[arg-type]
            return Decline("an intermediate of the norm has other uses", node)
        if any(t is not None and (graph.tensor_consumers(t) or graph.is_graph_output(t)) for t in node.outputs[1:]):
            return Decline("another output of the norm is used", node)
    reason = _dtype_issue(graph, reshape, norm, widen, narrow) or _geometry_issue(graph, rotary, norm, reshape)  # type: ignore[arg-type]
    if reason is not None:
        return Decline(reason, norm)
    return Match(rotary, x=reshape.inputs[0], norm=norm, chain=chain)


def _dtype_issue(
    graph: IrGraph, reshape: IrNode, norm: IrNode, widen: IrNode | None, narrow: IrNode | None
) -> str | None:
    """The norm runs in x's dtype, or (float16 exports) in float32 between a widening and a narrowing Cast."""
    x, scale = graph.tensor(reshape.inputs[0]), graph.tensor(norm.inputs[1])  # type: ignore[arg-type]
    if (widen is None) != (narrow is None):
        return "a Cast on one side of the norm only"
    if widen is None:
        return None if scale.dtype == x.dtype else f"x is {x.dtype.short} but the scale {scale.dtype.short}"
    wide, back = graph.tensor(widen.outputs[0]), graph.tensor(narrow.outputs[0])  # type: ignore[arg-type,union-attr]
    if wide.dtype != DataType.FLOAT or scale.dtype != DataType.FLOAT or back.dtype != x.dtype:
        return f"the Casts take {x.dtype.short} to {wide.dtype.short} and back to {back.dtype.short}; expected f32 and back"
    return None


def _geometry_issue(graph: IrGraph, rotary: IrNode, norm: IrNode, reshape: IrNode) -> str | None:
    x, rows, rotated = (graph.tensor(t).shape for t in (reshape.inputs[0], norm.inputs[0], rotary.inputs[0]))  # type: ignore[arg-type]
    if isinstance(x, Absent) or isinstance(rows, Absent) or isinstance(rotated, Absent) or len(rotated.dims) != 3:
        return "the rotary input is not 3-D [batch, sequence, heads * head]"
    if x.dims != rotated.dims:
        return f"x has shape {x} but the rotary input {rotated}: the reshapes are not a round trip"
    head, rank = rows.dims[-1], len(rows.dims)
    if int(norm.attributes.get("axis", -1)) not in (-1, rank - 1):
        return "the norm is not over the last axis"
    scale = graph.tensor(norm.inputs[1])  # type: ignore[arg-type]
    if dims_product(scale.shape.dims) != head:  # type: ignore[union-attr]
        return f"the scale {scale.shape} is not one {head}-element head"
    cos = graph.tensor(rotary.inputs[2])  # type: ignore[arg-type]
    hidden, width = rotated.dims[2], cos.shape.dims[-1]  # type: ignore[union-attr]
    if not isinstance(hidden, int) or not isinstance(width, int):
        return "the hidden size or the cache width is not static"
    attrs = rotary.attributes
    rotary_head = rotary_head_size(hidden, width, attrs.get("num_heads", 0), attrs.get("rotary_embedding_dim", 0))
    if head != rotary_head:
        return f"the norm's rows have {head} elements but the rotation's heads {rotary_head}"
    return None


def _rewrite(graph: IrGraph, m: Match) -> None:
    norm = m.norm
    epsilon = float(np.float32(norm.attributes.get("epsilon", LAYER_NORMS[norm.op_type].epsilon)))
    attrs = {"epsilon": epsilon, **{k: m.node.attributes[k] for k in _ROTARY_ATTRS if k in m.node.attributes}}
    graph.opset_imports.setdefault(ONYXIA_DOMAIN, 1)
    graph.replace_node(m.node, "RmsNormRotary", [m.x, *m.node.inputs[1:], norm.inputs[1]], attrs, domain=ONYXIA_DOMAIN)
    for node in m.chain:  # consumers first, so each removal leaves its output unused
        graph.remove_node(node)
        for t in node.outputs:
            if t is not None:
                graph.remove_tensor(t)


RMS_NORM_ROTARY_RULES = (
    Rule(
        "fuse_rms_norm_into_rotary",
        ("RotaryEmbedding",),
        _match,
        _rewrite,
        targets="onnx-community Gemma 3: Reshape -> SimplifiedLayerNormalization (q_norm/k_norm) -> Reshape -> RotaryEmbedding",
        domain=_MICROSOFT,
    ),
)


class FuseRmsNormIntoRotary(RewritePass):
    name = "FuseRmsNormIntoRotary"
    rules = RMS_NORM_ROTARY_RULES
