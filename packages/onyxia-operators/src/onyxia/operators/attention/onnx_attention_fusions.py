"""Rewrite rules that keep ai.onnx Attention's lowering (`attention.onnx_attention`) as lean as the other
layouts' attention: no copy of q, k, v or the output made only to move heads.

- ``bypass_lowered_identity``: `LowerContribOps` hands a lowered node's outputs over through an Identity
  each (a view once planned). Between two ops those Identities hide the producer from the rules below
  (and from ``fold_transpose_into_attention``, ``fuse_kv_append``), so one that is not a graph output is
  read through: its readers read its input.
- ``fold_query_transpose``: ``ScaledDotProductAttention(Transpose(x, [0, 2, 1, 3]), k, v, ...)`` reads x
  as [B, S, N, H] (``q_bsnh=1``): PyTorch's exporter moves the heads first before rotating,
  `rotate_before_transpose` rotates first, and this removes the Transpose left behind.
- ``read_grouped_kv``: ``ScaledDotProductAttention(q, Reshape(Expand(Unsqueeze(k, 2), [B, KV, G, T, H]),
  [B, KV * G, T, H]), ...)`` (transformers' ``repeat_kv`` before the Attention node, one per k and v)
  reads k itself: the kernel shares kv head ``n // G`` among the query heads, so the per-step copy of the
  whole cache the Expand makes (even with one kv head) goes. Declines a repeat that is not that shape.
- ``transpose_through_view``: ``Transpose(Reshape(ScaledDotProductAttention(...), same dims), [0, 2, 1, 3])``
  (the exporter's Phi-3 writes a Reshape to the shape the attention already has) writes the output
  transposed (``transpose_output=1``), as ``fold_transpose_into_attention`` does without the Reshape.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import Decline, Match, NewValue, Ops, Rewriter, Rule, Var, op
from onyxia.core.shapes import Absent
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = [
    "BYPASS_LOWERED_IDENTITY",
    "FOLD_QUERY_TRANSPOSE",
    "ONNX_ATTENTION_FUSIONS",
    "READ_GROUPED_KV",
    "TRANSPOSE_THROUGH_VIEW",
]


def _lowered(graph: IrGraph, node: IrNode) -> bool:
    return node.name.endswith("/out")  # the Identity `LowerContribOps` splices in (operators.lowering)


def _identity_check(graph: IrGraph, m: Match) -> Decline | None:
    out = m.node.outputs[0]
    if graph.is_graph_output(out) or graph.is_graph_output(m.x) or m.x in graph.inputs:
        return Decline("the Identity joins a graph input or output: it names a value the caller reads", m.node)
    return None


BYPASS_LOWERED_IDENTITY = Rule(
    "bypass_lowered_identity",
    op.Identity(Var("x"), _where=_lowered),
    lambda r, m: [m.x],
    check=_identity_check,
    targets="ai.onnx Attention / RotaryEmbedding lowered: the Identity handing over each output",
)


def _plain_query(graph: IrGraph, node: IrNode) -> bool:
    return not node.attributes.get("q_bsnh", 0)


def _fold_query(r: Rewriter, m: Match) -> list[NewValue]:
    inputs = [m.x, *m.node.inputs[1:]]
    return [r.op("ScaledDotProductAttention", *inputs, domain=ONYXIA_DOMAIN, **{**m.node.attributes, "q_bsnh": 1})]


def _single_output(graph: IrGraph, node: IrNode) -> bool:
    return _plain_query(graph, node) and (len(node.outputs) == 1 or node.outputs[1] is None)


FOLD_QUERY_TRANSPOSE = Rule(
    "fold_query_transpose",
    Ops(ONYXIA_DOMAIN).ScaledDotProductAttention(
        op.Transpose(Var("x"), perm=[0, 2, 1, 3]), Var("k"), Var("v"), _extra_inputs=True, _where=_single_output
    ),
    _fold_query,
    targets="torch.onnx.export(dynamo=True): Attention(Transpose(rotated q [B, S, N, H]), ...)",
)


# ----- read_grouped_kv ----------------------------------------------------------------------------
_KV_SLOTS = {"k": 1, "v": 2}


def _repeated(tag: str) -> object:
    unsqueeze = op.Unsqueeze(Var("kv"), _name="unsqueeze", _extra_inputs=True)
    return op.Reshape(op.Expand(unsqueeze, Var(), _name="expand"), Var(), _name="repeat")


def _dims(graph: IrGraph, t: int) -> tuple[object, ...] | None:
    shape = graph.tensor(t).shape
    return None if isinstance(shape, Absent) else tuple(shape.dims)


def _unsqueeze_axes(graph: IrGraph, node: IrNode) -> list[int] | None:
    axes = node.attributes.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = graph.tensor(node.inputs[1]).value
    return None if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]


def _grouped_check(graph: IrGraph, m: Match) -> Decline | None:
    if _unsqueeze_axes(graph, m.unsqueeze) not in ([2], [-3]):
        return Decline("the repeat-kv Unsqueeze is not at axis 2", m.node)
    kv, expanded, repeated = (_dims(graph, t) for t in (m.kv, m.expand.outputs[0], m.repeat.outputs[0]))
    if kv is None or expanded is None or repeated is None or len(kv) != 4 or len(repeated) != 4:
        return Decline("the repeat-kv shapes are not inferred 4-D [B, KV, T, H] -> [B, N, T, H]", m.node)
    heads, kv_heads = repeated[1], kv[1]
    if not isinstance(heads, int) or not isinstance(kv_heads, int) or kv_heads <= 0 or heads % kv_heads:
        return Decline(f"{heads} repeated heads do not group over {kv_heads} kv heads (static counts needed)", m.node)
    group = heads // kv_heads
    if expanded != (kv[0], kv_heads, group, kv[2], kv[3]) or repeated != (kv[0], heads, kv[2], kv[3]):
        return Decline(
            f"the repeat-kv goes {list(kv)} -> {expanded} -> {repeated}, not [B, KV, G, T, H] -> [B, N, T, H]"
        )
    return None


def _read_grouped(slot: int) -> object:
    def rewrite(r: Rewriter, m: Match) -> dict[int, NewValue]:
        inputs = list(m.node.inputs)
        inputs[slot] = m.kv
        outputs = len(m.node.outputs)
        new = r.op("ScaledDotProductAttention", *inputs, domain=ONYXIA_DOMAIN, outputs=outputs, **m.node.attributes)
        values = r.outputs_of(new) if outputs > 1 else (new,)
        return {old: value for old, value in zip(m.node.outputs, values, strict=True) if old is not None}

    return rewrite


def _grouped_rule(tag: str) -> Rule:
    slot = _KV_SLOTS[tag]
    inputs: list[object] = [Var("q"), Var("k"), Var("v")]
    inputs[slot] = _repeated(tag)
    return Rule(
        f"read_grouped_{tag}",
        Ops(ONYXIA_DOMAIN).ScaledDotProductAttention(*inputs, _extra_inputs=True),  # type: ignore[arg-type]
        _read_grouped(slot),  # type: ignore[arg-type]
        check=_grouped_check,
        targets=f"torch.onnx.export(dynamo=True): Attention(q, repeat_kv({tag}), ...) after the Concat cache",
    )


READ_GROUPED_KV = (_grouped_rule("k"), _grouped_rule("v"))


# ----- transpose_through_view ---------------------------------------------------------------------
def _untransposed(graph: IrGraph, node: IrNode) -> bool:
    return not node.attributes.get("transpose_output", 0) and (len(node.outputs) == 1 or node.outputs[1] is None)


def _view_check(graph: IrGraph, m: Match) -> Decline | None:
    before, after = _dims(graph, m.sdpa.outputs[0]), _dims(graph, m.view.outputs[0])
    if before is None or before != after:
        return Decline(f"the Reshape between attention and Transpose changes {before} to {after}", m.node)
    return None


TRANSPOSE_THROUGH_VIEW = Rule(
    "transpose_through_view",
    op.Transpose(
        op.Reshape(
            Ops(ONYXIA_DOMAIN).ScaledDotProductAttention(
                Var(), Var(), Var(), _name="sdpa", _extra_inputs=True, _where=_untransposed
            ),
            Var(),
            _name="view",
        ),
        perm=[0, 2, 1, 3],
    ),
    lambda r, m: [
        r.op(
            "ScaledDotProductAttention",
            *m.sdpa.inputs,
            domain=ONYXIA_DOMAIN,
            **{**m.sdpa.attributes, "transpose_output": 1},
        )
    ],
    check=_view_check,
    targets="torch.onnx.export(dynamo=True) Phi-3: Transpose(Reshape(Attention(...), [B, N, -1, H]))",
)

ONNX_ATTENTION_FUSIONS = (BYPASS_LOWERED_IDENTITY, FOLD_QUERY_TRANSPOSE, *READ_GROUPED_KV, TRANSPOSE_THROUGH_VIEW)
