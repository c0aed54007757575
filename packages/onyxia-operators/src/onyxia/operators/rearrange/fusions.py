"""Rewrite rules over Transpose, this family's op: pairs that cancel disappear, pairs that do not merge.

Exporters transpose around layout-agnostic work (torch's NCHW <-> NHWC round trips, ``permute`` before
and after an activation), and each Transpose is a full copy on the GPU. All on private chains (no
intermediate read elsewhere, a graph output or shared storage):

- ``cancel_transposes``: ``Transpose(Transpose(x, a), b)`` with ``a`` then ``b`` the identity is ``x``;
  also across layout-free elementwise ops between them (unary rows, Cast, and binary rows whose other
  operands are single elements): ``Transpose(Relu(Transpose(x, a)), b)`` becomes ``Relu(x)``;
- ``merge_transposes``: two adjacent Transposes that do not cancel become one with the composed perm.

Declines (reason logged, graph unchanged) when the perms across an elementwise chain do not cancel,
or when the pair cancels to nothing and its output is a graph output (the output's name must stay).
"""

from __future__ import annotations

from typing import Any

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import Attr, Chain, Decline, Match, NewValue, Rewriter, Rule, Var, is_folded, op
from onyxia.core.shapes import Absent, Static
from onyxia.operators.elementwise import BINARY, UNARY
from onyxia.operators.elementwise.cast import CAST

__all__ = ["TRANSPOSE_FUSIONS"]

_LAYOUT_FREE = frozenset(UNARY) | frozenset(BINARY) | frozenset(CAST)


def _live(graph: IrGraph, node: IrNode) -> bool:
    out = node.outputs[0]
    return not is_folded(graph, node) and out is not None and not isinstance(graph.tensor(out).shape, Absent)


def _layout_step(graph: IrGraph, node: IrNode) -> int | None:
    """The input carrying the layout through a layout-free node (the others single elements)."""
    if node.domain != "" or node.op_type not in _LAYOUT_FREE or is_folded(graph, node):
        return None
    shape = graph.tensor(node.outputs[0]).shape if node.outputs[0] is not None else Absent()
    rank = 0 if isinstance(shape, Absent) else len(shape.dims)
    carrying = [i for i, t in enumerate(node.inputs) if t is not None and not _single_element(graph, t, rank)]
    return carrying[0] if len(carrying) == 1 else None


def _single_element(graph: IrGraph, t: int, rank: int) -> bool:
    shape = graph.tensor(t).shape
    return isinstance(shape, Static) and len(shape.dims) <= rank and all(d == 1 for d in shape.dims)


def _perm(graph: IrGraph, perm: Any, t: int) -> list[int]:
    shape = graph.tensor(t).shape
    rank = 0 if isinstance(shape, Absent) else len(shape.dims)
    return list(range(rank - 1, -1, -1)) if perm is None else [int(p) for p in perm]  # ONNX default: reverse


def _composed(graph: IrGraph, m: Match) -> list[int]:
    a, b = _perm(graph, m.a, m.x), _perm(graph, m.b, m.x)
    return [a[j] for j in b]


def _inner() -> Any:
    return op.Transpose(Var("x"), perm=Attr("a", None), _name="inner", _where=_live)


# ----- cancel_transposes --------------------------------------------------------------------------
def _cancel_check(graph: IrGraph, m: Match) -> Decline | None:
    composed = _composed(graph, m)
    cancels = composed == list(range(len(composed)))
    if not cancels and m.chain:
        a, b = _perm(graph, m.a, m.x), _perm(graph, m.b, m.x)
        return Decline(f"perms {a} then {b} compose to {composed}, not the identity", m.inner)
    if cancels and not m.chain and graph.is_graph_output(m.node.outputs[0]):
        return Decline("the pair cancels to nothing but its output is a graph output", m.node)
    return None


def _cancel(r: Rewriter, m: Match) -> list[int | NewValue] | None:
    composed = _composed(r.graph, m)
    if composed != list(range(len(composed))):
        return None  # a pair that does not cancel: merge_transposes' case
    value: int | NewValue = m.x
    for member in m.chain:  # innermost first: each reads the previous one's result instead
        index = _layout_step(r.graph, member)
        inputs = [value if i == index else t for i, t in enumerate(member.inputs)]
        value = r.op(member.op_type, *inputs, name=member.name, **member.attributes)
    return [value]


CANCEL_TRANSPOSES = Rule(
    "cancel_transposes",
    op.Transpose(Chain("chain", _layout_step, _inner()), perm=Attr("b", None), _where=_live),
    _cancel,
    check=_cancel_check,
    targets="NCHW<->NHWC round trips and permute -> activation -> inverse permute (torch exports)",
)


# ----- merge_transposes ---------------------------------------------------------------------------
def _merge(r: Rewriter, m: Match) -> list[NewValue] | None:
    composed = _composed(r.graph, m)
    if composed == list(range(len(composed))):
        return None  # they cancel: cancel_transposes' case
    return [r.op("Transpose", m.x, perm=composed)]


MERGE_TRANSPOSES = Rule(
    "merge_transposes",
    op.Transpose(_inner(), perm=Attr("b", None), _where=_live),
    _merge,
    targets="back-to-back permutes from exporters that transpose per submodule",
)

TRANSPOSE_FUSIONS = (CANCEL_TRANSPOSES, MERGE_TRANSPOSES)
