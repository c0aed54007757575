"""Kernel-less simplifications of the elementwise family: an op applied twice that undoes itself is no op.

- ``cancel_double_Not``, ``cancel_double_BitwiseNot``, ``cancel_double_Neg``: ``Op(Op(x))`` is ``x``, exactly,
  in every dtype the rows take: Not and BitwiseNot are involutions, and Neg of a signed integer's minimum
  wraps to itself, so twice gives x back. For int64 (stored as i32, `onyxia.operators.int64_checks`) the
  pair would even fail where ONNX does not: -(-2^31) fits int64 but not its storage, and the checked Neg
  reports it; without the pair there is nothing to report.

The inner node must be private to the pair (the matcher's rule for inner nodes); the rule declines when
the outer output is a graph output, whose name must stay. The rules produce no node, so no kernel: they
live with the family of the ops they remove, and the `SimplifyElementwise` pass applies them before the
fusions see the pair.
"""

from __future__ import annotations

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import Decline, Match, Rewriter, Rule, Var, is_folded, op

__all__ = ["INVOLUTIONS"]

_INVOLUTIONS = ("Not", "BitwiseNot", "Neg")


def _computed(graph: IrGraph, node: IrNode) -> bool:
    return not is_folded(graph, node)  # folded pairs are constant folding's


def _keeps_output_name(graph: IrGraph, m: Match) -> Decline | None:
    if graph.is_graph_output(m.node.outputs[0]):
        return Decline("the pair cancels to nothing but its output is a graph output", m.node)
    return None


def _cancel(r: Rewriter, m: Match) -> list[int]:
    return [m.x]


def _rule(op_type: str) -> Rule:
    twice = getattr(op, op_type)(getattr(op, op_type)(Var("x"), _where=_computed), _where=_computed)
    return Rule(
        f"cancel_double_{op_type}", twice, _cancel, check=_keeps_output_name, targets=f"{op_type}({op_type}(x))"
    )


INVOLUTIONS = tuple(_rule(op_type) for op_type in _INVOLUTIONS)
