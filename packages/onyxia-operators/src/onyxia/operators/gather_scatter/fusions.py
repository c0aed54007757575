"""Rewrite rules that produce this family's Gather.

- ``gather_columns_of_transposed_table``: ``Gather(Transpose(w, perm=[1, 0]), ids, axis=0)`` becomes
  ``Transpose(Gather(w, ids, axis=1))``. The onnxruntime-genai builder writes a tied embedding this way:
  the table is stored once as the lm head's [hidden, vocab] weight, and the embedding transposes it
  whole to read rows. Past the fold limit that Transpose would run on the GPU every step and bind the
  whole table (188 MB for SmolLM2-360M, 622 MB for Qwen2.5-0.5B: over a 128 MiB binding); gathering
  the table's columns and transposing the few looked-up rows reads only what is needed. Declines
  (reason logged, graph unchanged) for any other perm or gather axis.
"""

from __future__ import annotations

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import Attr, Decline, Match, NewValue, Rewriter, Rule, Var, is_folded, op

__all__ = ["GATHER_FUSIONS"]


def _live(graph: IrGraph, node: IrNode) -> bool:
    return not is_folded(graph, node)


def _check(graph: IrGraph, m: Match) -> Decline | None:
    if len(graph.tensor(m.w).dims) != 2:
        return Decline("the transposed table is not 2-D", m.node)
    perm = [1, 0] if m.perm is None else [int(p) for p in m.perm]
    if perm != [1, 0] or int(m.axis) not in (0, -2):
        return Decline(f"perm {perm} with gather axis {m.axis}: not rows of a transposed table", m.node)
    return None


def _columns(r: Rewriter, m: Match) -> list[NewValue]:
    rank = len(r.graph.tensor(m.ids).dims)
    columns = r.op("Gather", m.w, m.ids, axis=1)  # [hidden, *ids.shape]
    return [r.op("Transpose", columns, perm=[*range(1, rank + 1), 0])]


GATHER_FUSIONS = (
    Rule(
        "gather_columns_of_transposed_table",
        op.Gather(
            op.Transpose(Var("w"), perm=Attr("perm", None), _where=_live),  # a folded one costs nothing
            Var("ids"),
            axis=Attr("axis", 0),
            _where=_live,
        ),
        _columns,
        check=_check,
        targets="onnxruntime-genai tied embeddings: Gather(Transpose(lm_head.MatMul.weight), input_ids)",
    ),
)
