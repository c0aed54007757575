"""Rewrite rules that keep ai.onnx Attention's lowering (`attention.onnx_attention`) as lean as the other
layouts' attention: no copy of q, k, v or the output made only to move heads.

- ``bypass_lowered_identity``: `LowerContribOps` hands a lowered node's outputs over through an Identity
  each (a view once planned). Between two ops those Identities hide the producer from the rules below
  (and from ``fold_transpose_into_attention``, ``fuse_kv_append``), so one that is not a graph output is
  read through: its readers read its input.
- ``fold_query_transpose``: ``ScaledDotProductAttention(Transpose(x, [0, 2, 1, 3]), k, v, ...)`` reads x
  as [B, S, N, H] (``q_bsnh=1``): PyTorch's exporter moves the heads first before rotating,
  `rotate_before_transpose` rotates first, and this removes the Transpose left behind.
"""

from __future__ import annotations

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import Decline, Match, NewValue, Ops, Rewriter, Rule, Var, op
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["BYPASS_LOWERED_IDENTITY", "FOLD_QUERY_TRANSPOSE", "ONNX_ATTENTION_FUSIONS"]


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

ONNX_ATTENTION_FUSIONS = (BYPASS_LOWERED_IDENTITY, FOLD_QUERY_TRANSPOSE)
