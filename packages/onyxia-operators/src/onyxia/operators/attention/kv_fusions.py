"""Rewrite rules for the KV cache of plain-attention exports (optimum's Concat-grown caches).

- ``fuse_kv_append``: ``Concat(past, new, axis=-2)`` with past a graph input ([B, KV, P, H], the
  ``past_key_values.N.*`` of optimum's ``text-generation-with-past`` exports) becomes com.onyxia
  KvAppend(past, new): one dispatch where Concat takes one per input, and when the session aliased
  present to past (`AliasKvCache`) it keeps appending in place. When new is
  ``Transpose(x, [0, 2, 1, 3])`` (the value projection's ``Reshape`` to [B, S, KV, H] moved to
  [B, KV, S, H]), KvAppend reads x in that layout (``new_layout="BSNH"``) and the Transpose, a
  dispatch and a stored copy per layer, goes.

Declines (reason logged, graph unchanged): past not a graph input (a Concat along axis 2 that is no
cache), inputs that are not two 4-D tensors of one dtype, or a new tensor whose batch, kv-head or
head-size dims differ from past's.
"""

from __future__ import annotations

from onyxia.core import IrGraph
from onyxia.core.rewrite import AnyOf, Attr, Decline, Match, NewValue, Rewriter, Rule, Var, op
from onyxia.core.shapes import Absent
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["FUSE_KV_APPEND", "KV_CACHE_FUSIONS"]

_NEW = AnyOf(op.Transpose(Var("new"), _name="transpose", perm=[0, 2, 1, 3]), Var("new"))


def _append_check(graph: IrGraph, m: Match) -> Decline | None:
    if m.past not in graph.inputs:
        return Decline("the first Concat input is not a graph input (a past KV cache)", m.node)
    if m.axis not in (2, -2):
        return Decline(f"the Concat joins axis {m.axis}, not the sequence axis 2 of a [B, KV, T, H] cache", m.node)
    past, new = graph.tensor(m.past), graph.tensor(m.new)
    if isinstance(past.shape, Absent) or isinstance(new.shape, Absent):
        return Decline("a Concat input has no inferred shape", m.node)
    if len(past.shape.dims) != 4 or len(new.shape.dims) != 4 or past.dtype != new.dtype:
        return Decline(
            f"past {past.dtype.short}{past.shape} and new {new.dtype.short}{new.shape} are not 4-D of one dtype"
        )
    b, kv, _, h = past.shape.dims
    nb, s1, s2, nh = new.shape.dims
    heads = s2 if _transposed(m) else s1
    if (nb, heads, nh) != (b, kv, h):
        return Decline(f"new {new.shape} does not carry past {past.shape}'s batch, kv heads and head size", m.node)
    return None


def _transposed(m: Match) -> bool:
    return getattr(m, "transpose", None) is not None


def _append(r: Rewriter, m: Match) -> list[NewValue]:
    layout = "BSNH" if _transposed(m) else "BNSH"
    return [r.op("KvAppend", m.past, m.new, domain=ONYXIA_DOMAIN, new_layout=layout)]


FUSE_KV_APPEND = Rule(
    "fuse_kv_append",
    op.Concat(Var("past"), _NEW, axis=Attr("axis")),
    _append,
    check=_append_check,
    targets="optimum: present = Concat(past_key_values.N.*, Transpose(Reshape(v_proj(x)), [0, 2, 1, 3]), axis=-2)",
)

KV_CACHE_FUSIONS = (FUSE_KV_APPEND,)
