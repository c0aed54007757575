"""Rewrite rules for the KV cache of plain-attention exports (optimum's Concat-grown caches).

- ``fuse_kv_append``: ``Concat(past, new, axis=-2)`` with past a graph input ([B, KV, P, H], the
  ``past_key_values.N.*`` of optimum's ``text-generation-with-past`` exports) becomes com.onyxia
  KvAppend(past, new): one dispatch where Concat takes one per input, and when the session aliased
  present to past (`AliasKvCache`) it keeps appending in place. When new is
  ``Transpose(x, [0, 2, 1, 3])`` (the value projection's ``Reshape`` to [B, S, KV, H] moved to
  [B, KV, S, H]), KvAppend reads x in that layout (``new_layout="BSNH"``) and the Transpose, a
  dispatch and a stored copy per layer, goes.
- ``merge_kv_appends``: the key and value appends one ScaledDotProductAttention reads (one pair each, the
  same dims) become one two-pair KvAppend: a layer's cache update is one dispatch, not two. It applies
  once `FuseAttention` has made the attention (the stage repeats its passes until nothing changes).
- ``kv_append_into_output``: ``present = Identity(KvAppend(...))`` with present a graph output (ai.onnx
  Attention's lowering hands its present_key/present_value over so, `operators.lowering`) becomes the
  KvAppend writing present itself. The LLM session aliases present to past (and with the resident layout
  stores past as [slots, KV, capacity, H]): an Identity between them would copy the whole cache into the
  past buffer each step, and the append could not write in place.

Declines (reason logged, graph unchanged): past not a graph input (a Concat along axis 2 that is no
cache), inputs that are not two 4-D tensors of one dtype, or a new tensor whose batch, kv-head or
head-size dims differ from past's; for the merge, one append read as both k and v, or key and value
caches of different dims or dtypes.
"""

from __future__ import annotations

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import AnyOf, Attr, Decline, Match, NewValue, Ops, Rewriter, Rule, Var, op
from onyxia.core.rewrite.patterns import OpPattern
from onyxia.core.shapes import Absent
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["FUSE_KV_APPEND", "KV_APPEND_INTO_OUTPUT", "KV_CACHE_FUSIONS", "MERGE_KV_APPENDS"]

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
    return [r.op("KvAppend", m.past, m.new, domain=ONYXIA_DOMAIN, new_layouts=[layout])]


FUSE_KV_APPEND = Rule(
    "fuse_kv_append",
    op.Concat(Var("past"), _NEW, axis=Attr("axis")),
    _append,
    check=_append_check,
    targets="optimum: present = Concat(past_key_values.N.*, Transpose(Reshape(v_proj(x)), [0, 2, 1, 3]), axis=-2)",
)


# ----- merge_kv_appends ---------------------------------------------------------------------------
def _one_pair(graph: IrGraph, node: IrNode) -> bool:
    return len(node.inputs) == 2


def _append_pattern(tag: str) -> OpPattern:
    return Ops(ONYXIA_DOMAIN).KvAppend(
        Var(f"past_{tag}"), Var(f"new_{tag}"), _name=f"{tag}_append", _shared=True, _where=_one_pair
    )


def _merge_check(graph: IrGraph, m: Match) -> Decline | None:
    if m.k_append.id == m.v_append.id:
        return Decline("one KvAppend is read as both k and v", m.node)
    k, v = (graph.tensor(n.outputs[0]) for n in (m.k_append, m.v_append))
    if k.dtype != v.dtype or isinstance(k.shape, Absent) or k.shape != v.shape:
        return Decline(
            f"the key cache {k.dtype.short}{k.shape} and value cache {v.dtype.short}{v.shape} differ", m.node
        )
    return None


def _merge(r: Rewriter, m: Match) -> dict[int, NewValue]:
    appends = (m.k_append, m.v_append)
    layouts = [layout for n in appends for layout in n.attributes.get("new_layouts", ["BNSH"])]
    merged = r.op(
        "KvAppend", m.past_k, m.new_k, m.past_v, m.new_v, domain=ONYXIA_DOMAIN, outputs=2, new_layouts=layouts
    )
    return {n.outputs[0]: out for n, out in zip(appends, r.outputs_of(merged), strict=True)}


MERGE_KV_APPENDS = Rule(
    "merge_kv_appends",
    Ops(ONYXIA_DOMAIN).ScaledDotProductAttention(
        Var("q"), _append_pattern("k"), _append_pattern("v"), _extra_inputs=True
    ),
    _merge,
    check=_merge_check,
    targets="optimum (after FuseAttention): a layer's key and value KvAppends, read by its attention",
)


# ----- kv_append_into_output ----------------------------------------------------------------------
def _output_check(graph: IrGraph, m: Match) -> Decline | None:
    if not graph.is_graph_output(m.node.outputs[0]):
        return Decline("the Identity's output is no graph output (a view once planned)", m.node)
    return None


def _into_output(r: Rewriter, m: Match) -> dict[int, NewValue]:
    append = m.append
    new = r.outputs_of(
        r.op(
            "KvAppend",
            *append.inputs,
            domain=ONYXIA_DOMAIN,
            outputs=len(append.outputs),
            name=append.name,
            **append.attributes,
        )
    )
    present = m.node.outputs[0]
    assert present is not None
    replacement = {present: new[m.append_output]}  # first: that output takes over the graph output
    replacement.update({old: value for old, value in zip(append.outputs, new, strict=True) if old is not None})
    return replacement


KV_APPEND_INTO_OUTPUT = Rule(
    "kv_append_into_output",
    op.Identity(Ops(ONYXIA_DOMAIN).KvAppend(_name="append", _output=None, _shared=True, _extra_inputs=True)),
    _into_output,
    check=_output_check,
    targets="ai.onnx Attention lowered: present_key = Identity(the KvAppend of Concat(past_key, k))",
)

KV_CACHE_FUSIONS = (FUSE_KV_APPEND, MERGE_KV_APPENDS, KV_APPEND_INTO_OUTPUT)
