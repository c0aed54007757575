"""``fuse_norm_into_skip_norm``: Gemma's sandwich norms, a block's post-norm, the residual add and the next
pre-norm, as one com.onyxia NormAddNorm dispatch instead of two.

Gemma 2 and 3 normalise each block's output before the residual add (``post_attention_layernorm``,
``post_feedforward_layernorm``) and the sum again before the next block (``pre_feedforward_layernorm``, the
next layer's ``input_layernorm``). After `FuseResidualRmsNorm` that reads
``SkipSimplifiedLayerNormalization(residual, SimplifiedLayerNormalization(h, s1), s2)`` (the norm's output at
either of the first two inputs), which is ``NormAddNorm(residual, h, s2, s1)``: one workgroup per row reduces
h's row, adds the normalised row to the residual, reduces the sum and writes both the sum (the new residual)
and its norm. -2 dispatches per Gemma decoder layer.

Declines: the inner norm is over another axis than the last, or its output is broadcast against the residual
(the fused kernel reduces the skip's rows where the sum's rows are); Skip* with a bias input does not match.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import Attr, Decline, Match, NewValue, OpPattern, Rewriter, Rule, Var, is_folded, ms, op
from onyxia.core.shapes import Absent
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.normalization.layer_norm import LAYER_NORMS, LAYER_NORMS_MS

__all__ = ["NORM_ADD_NORM_FUSIONS"]

_NORMS = ("SimplifiedLayerNormalization", "RMSNormalization")
_SKIP_NORM = "SkipSimplifiedLayerNormalization"


def _live_norm(graph: IrGraph, node: IrNode) -> bool:
    return not is_folded(graph, node) and len(node.inputs) >= 2 and node.inputs[1] is not None


def _pattern(position: int) -> OpPattern:
    """Skip*(residual, norm(h)) with the norm's output at input `position` (0 or 1)."""
    inner = op.any_of(_NORMS, Var("h"), Var("h_scale"), _name="inner", _where=_live_norm, axis=Attr("axis", -1))
    operands = (inner, Var("residual")) if position == 0 else (Var("residual"), inner)
    return ms.SkipSimplifiedLayerNormalization(*operands, Var("scale"), _where=lambda g, n: not is_folded(g, n))


def _check(graph: IrGraph, m: Match) -> Decline | None:
    normed, residual = graph.tensor(_out(m.inner)), graph.tensor(m.residual)
    if isinstance(normed.shape, Absent) or isinstance(residual.shape, Absent):
        return Decline("the norm's or the residual's shape is unknown", m.inner)
    rank = len(normed.shape.dims)
    if rank == 0 or m.axis not in (-1, rank - 1):
        return Decline(f"the inner norm's axis {m.axis} is not the last axis of a rank-{rank} input", m.inner)
    if _trimmed(normed.shape.dims) != _trimmed(residual.shape.dims):
        return Decline(f"the norm's output {normed.shape} is broadcast against the residual {residual.shape}", m.inner)
    return None


def _trimmed(dims: tuple[object, ...]) -> list[object]:
    out = list(dims)
    while out and out[0] == 1:
        out.pop(0)
    return out


def _rewrite(r: Rewriter, m: Match) -> dict[int, NewValue]:
    skip_norm, inner = m.node, m.inner
    fused = r.op(
        "NormAddNorm",
        m.residual,
        m.h,
        m.scale,
        m.h_scale,
        domain=ONYXIA_DOMAIN,
        outputs=len(skip_norm.outputs),
        epsilon=_epsilon(skip_norm, LAYER_NORMS_MS[_SKIP_NORM].epsilon),
        skip_epsilon=_epsilon(inner, LAYER_NORMS[inner.op_type].epsilon),
    )
    return {old: new for old, new in zip(skip_norm.outputs, r.outputs_of(fused)) if old is not None}


def _epsilon(node: IrNode, default: float) -> float:
    return float(np.float32(node.attributes.get("epsilon", default)))


def _out(node: IrNode) -> int:
    t = node.outputs[0]
    assert t is not None, f"node '{node.name}' matched with no output 0"
    return t


NORM_ADD_NORM_FUSIONS = tuple(
    Rule(
        f"fuse_norm_into_skip_norm{suffix}",
        _pattern(position),
        _rewrite,
        check=_check,
        targets="Gemma 2/3 sandwich norms: SkipSimplifiedLayerNormalization(residual, SLN(block output))",
    )
    for position, suffix in ((1, ""), (0, "_at_input_0"))
)
