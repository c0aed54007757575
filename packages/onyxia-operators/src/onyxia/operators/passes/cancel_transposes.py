"""`CancelTransposes`: Transpose pairs whose permutations compose to the identity disappear.

Exporters transpose around layout-agnostic work (torch's NCHW <-> NHWC round trips, ``permute`` before
and after an activation), and each Transpose is a full copy on the GPU. Cases, all on single-use chains
(no intermediate is read elsewhere, a graph output or shared storage):

- ``cancel_transposes``: ``Transpose(Transpose(x, a), b)`` with ``a`` then ``b`` the identity is ``x``;
  also across layout-free elementwise ops between them (unary rows, Cast, and binary rows whose other
  operands are single elements): ``Transpose(Relu(Transpose(x, a)), b)`` becomes ``Relu(x)``;
- ``merge_transposes``: two adjacent Transposes that do not cancel become one with the composed perm.

Declines (reason logged, graph unchanged) when the perms across an elementwise chain do not cancel,
or when the pair cancels to nothing and its output is a graph output (the output's name must stay).
"""

from __future__ import annotations

from onyxia.core import IrGraph, IrNode
from onyxia.core.shapes import Absent, Static
from onyxia.operators.elementwise import BINARY, UNARY
from onyxia.operators.movement.cast import CAST
from onyxia.operators.passes.rewrite import Decline, Match, RewritePass, Rule, is_folded, producer, sole_use

__all__ = ["TRANSPOSE_RULES", "CancelTransposes"]

_LAYOUT_FREE = frozenset(UNARY) | frozenset(BINARY) | frozenset(CAST)
_MAX_CHAIN = 16


def _perm(graph: IrGraph, transpose: IrNode) -> list[int]:
    rank = len(graph.tensor(transpose.inputs[0]).shape.dims)  # type: ignore[arg-type,union-attr]
    return [int(p) for p in transpose.attributes.get("perm", range(rank - 1, -1, -1))]  # ONNX default: reverse


def _walk(graph: IrGraph, outer: IrNode) -> tuple[IrNode, list[IrNode]] | None:
    """The inner Transpose and the elementwise chain (inner to outer) between it and `outer`."""
    chain: list[IrNode] = []
    t = outer.inputs[0]
    while t is not None and len(chain) <= _MAX_CHAIN:
        node = graph.tensor_producer(t)
        if node is None or node.domain != "" or sole_use(graph, t) is None or is_folded(graph, node):
            return None
        if node.op_type == "Transpose":
            return node, chain[::-1]
        if node.op_type not in _LAYOUT_FREE:
            return None
        t = _layout_input(graph, node)
        chain.append(node)
    return None


def _layout_input(graph: IrGraph, node: IrNode) -> int | None:
    """The one input that carries the layout; the others must be single elements (or the node is
    not layout-free)."""
    rank = len(graph.tensor(node.outputs[0]).shape.dims)  # type: ignore[arg-type,union-attr]
    carrying = [t for t in node.inputs if t is not None and not _single_element(graph, t, rank)]
    return carrying[0] if len(carrying) == 1 else None


def _single_element(graph: IrGraph, t: int, rank: int) -> bool:
    shape = graph.tensor(t).shape
    return isinstance(shape, Static) and len(shape.dims) <= rank and all(d == 1 for d in shape.dims)


def _match_cancel(graph: IrGraph, outer: IrNode) -> Match | Decline | None:
    if is_folded(graph, outer) or isinstance(graph.tensor(outer.outputs[0]).shape, Absent):  # type: ignore[arg-type]
        return None
    found = _walk(graph, outer)
    if found is None:
        return None
    inner, chain = found
    a, b = _perm(graph, inner), _perm(graph, outer)
    composed = [a[j] for j in b]
    if composed != list(range(len(composed))):
        return Decline(f"perms {a} then {b} compose to {composed}, not the identity", inner) if chain else None
    if not chain and graph.is_graph_output(outer.outputs[0]):
        return Decline("the pair cancels to nothing but its output is a graph output", outer)
    return Match(outer, inner=inner, chain=chain)


def _cancel(graph: IrGraph, m: Match) -> None:
    outer, inner, chain = m.node, m.inner, m.chain
    x, inner_out, outer_out = inner.inputs[0], inner.outputs[0], outer.outputs[0]
    if not chain:
        graph.replace_all_uses(outer_out, x)
        _drop(graph, outer)
    else:
        node, index = graph.tensor_consumers(inner_out)[0]
        graph.set_input(node, index, x)
        layout = graph.tensor(x).shape
        for member in chain[:-1]:
            graph.tensor(member.outputs[0]).shape = layout
        last = chain[-1]
        old_out = last.outputs[0]
        graph.remove_node(outer, safe=False)  # its output moves to the last chain member
        graph.replace_node(last, last.op_type, last.inputs, last.attributes, outputs=[outer_out])
        graph.remove_tensor(old_out)
    _drop(graph, inner)


def _match_merge(graph: IrGraph, outer: IrNode) -> Match | None:
    inner = producer(graph, outer.inputs[0], ("Transpose",))
    if inner is None or is_folded(graph, outer) or sole_use(graph, outer.inputs[0]) is None:  # type: ignore[arg-type]
        return None
    a, b = _perm(graph, inner), _perm(graph, outer)
    composed = [a[j] for j in b]
    return None if composed == list(range(len(composed))) else Match(outer, inner=inner, perm=composed)


def _merge(graph: IrGraph, m: Match) -> None:
    graph.replace_node(m.node, "Transpose", [m.inner.inputs[0]], {"perm": m.perm})
    _drop(graph, m.inner)


def _drop(graph: IrGraph, node: IrNode) -> None:
    graph.remove_node(node)
    for t in node.outputs:
        if t is not None:
            graph.remove_tensor(t)


TRANSPOSE_RULES = (
    Rule(
        "cancel_transposes",
        ("Transpose",),
        _match_cancel,
        _cancel,
        targets="NCHW<->NHWC round trips and permute -> activation -> inverse permute (torch exports)",
    ),
    Rule(
        "merge_transposes",
        ("Transpose",),
        _match_merge,
        _merge,
        targets="back-to-back permutes from exporters that transpose per submodule",
    ),
)


class CancelTransposes(RewritePass):
    name = "CancelTransposes"
    rules = TRANSPOSE_RULES
