"""``pair_rms_norm_rotary``: a layer's q and k RmsNormRotary (Gemma 3, Qwen 3: q_norm / k_norm before RoPE,
after `FuseRmsNormIntoRotary`) as one RmsNormRotaryPair dispatch: one workgroup per head of q, then of k.

The two are siblings: RmsNormRotary nodes reading the same position ids, cos and sin caches, with the same
epsilon, pairing and rotary dim, heads of one size and one dtype. Nodes that differ in any of these form no
pair (their key differs); a group of more than two keeps its first two (the rest pair among themselves).
"""

from __future__ import annotations

from collections.abc import Hashable

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import Match, NewValue, Rewriter, Rule, Siblings, is_folded
from onyxia.core.shapes import Absent
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["ROTARY_PAIR_FUSIONS"]

_ATTRS = ("epsilon", "interleaved", "rotary_embedding_dim", "angle_cache")


def _key(graph: IrGraph, node: IrNode) -> Hashable | None:
    """What two RmsNormRotary must share to run as one kernel; None for a node that cannot pair."""
    if len(node.inputs) != 5 or any(t is None for t in node.inputs) or is_folded(graph, node):
        return None
    x, _, cos, sin, scale = (graph.tensor(t) for t in node.inputs if t is not None)
    if isinstance(x.shape, Absent) or len(x.shape.dims) != 3 or isinstance(scale.shape, Absent):
        return None
    attrs = tuple(node.attributes.get(a) for a in _ATTRS)
    # the pair shares batch and sequence, and a head size (the scale's length)
    return (cos.id, sin.id, attrs, x.dtype, scale.dtype, scale.shape.dims, x.shape.dims[:2])


def _rewrite(r: Rewriter, m: Match) -> dict[int, NewValue]:
    first, second = m.members
    x, pos, cos, sin, scale = first.inputs
    attrs = {a: first.attributes[a] for a in (*_ATTRS, "num_heads") if a in first.attributes}
    pair = r.op(
        "RmsNormRotaryPair",
        x,
        pos,
        cos,
        sin,
        scale,
        second.inputs[0],
        second.inputs[4],
        domain=ONYXIA_DOMAIN,
        outputs=2,
        name=first.name,
        **attrs,
    )
    y, y2 = r.outputs_of(pair)
    return {_out(first): y, _out(second): y2}


def _out(node: IrNode) -> int:
    t = node.outputs[0]
    assert t is not None, f"node '{node.name}' matched with no output 0"
    return t


ROTARY_PAIR_FUSIONS = (
    Rule(
        "pair_rms_norm_rotary",
        Siblings(frozenset({(ONYXIA_DOMAIN, "RmsNormRotary")}), _key, lambda members: len(members) == 2, 1),
        _rewrite,
        targets="Gemma 3 / Qwen 3: the q and k RmsNormRotary of one layer (same positions and caches)",
    ),
)
