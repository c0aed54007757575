"""The one matcher: an `OpPattern` against a node, upstream along use-def edges, with backtracking.

Matching is a generator of binding dicts, so `AnyOf` alternatives and commuted operands are tried
in turn and a later conflict (a `Var` bound twice to different tensors, a node bound twice) backs
out of an earlier choice. A complete match is then checked for privacy: every matched node except
the anchor and those marked shared must have no use outside the match (not a graph output, not
shared storage), because the rewrite removes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode
from onyxia.core.rewrite.match import Match, private_outputs
from onyxia.core.rewrite.patterns import MISSING, AnyOf, Attr, Chain, Const, OpPattern, Pattern, Var

__all__ = ["match_pattern"]

_NODES = "$nodes"  # binding key: the matched (node, pattern) pairs, anchor first
Bindings = dict[str, Any]


def match_pattern(graph: IrGraph, pattern: OpPattern, node: IrNode) -> Match | None:
    """The first complete match of `pattern` anchored at `node` whose inner nodes are private."""
    if not _could_match(graph, pattern, node):
        return None
    for bindings in _node(graph, pattern, node, None, {_NODES: ()}):
        pairs: tuple[tuple[IrNode, OpPattern | None], ...] = bindings.pop(_NODES)
        nodes = [n for n, _ in pairs]
        members = {n.id for n in nodes}
        inner = [n for n, p in pairs if n.id != node.id and (p is None or not p.shared)]
        if all(private_outputs(graph, n, members) for n in inner):
            return Match(node, nodes=_unique(nodes), **bindings)
    return None


def _could_match(graph: IrGraph, p: OpPattern, node: IrNode) -> bool:
    """Op types along the fixed (not commuted, not alternative) input edges: most anchors fail here,
    before any binding is built."""
    if node.op_type not in p.op_types or node.domain != p.domain:
        return False
    if p.commute:
        return True
    for i, child in enumerate(p.inputs):
        if isinstance(child, OpPattern):
            t = node.inputs[i] if i < len(node.inputs) else None
            producer = None if t is None else graph.tensor_producer(t)
            if producer is None or not _could_match(graph, child, producer):
                return False
    return True


def _value(graph: IrGraph, pattern: Pattern | None, t: int | None, b: Bindings) -> Iterator[Bindings]:
    if pattern is None:
        if t is None:
            yield b
    elif isinstance(pattern, Var):
        if t is not None and (pattern.where is None or pattern.where(graph.tensor(t))):
            yield from _bind(b, pattern.name, t)
    elif isinstance(pattern, Const):
        tensor = None if t is None else graph.tensor(t)
        if tensor is not None and (tensor.value is not None or tensor.initializer is not None):
            yield from _bind(b, pattern.name, t)
    elif isinstance(pattern, AnyOf):
        for option in pattern.options:
            yield from _value(graph, option, t, b)
    elif isinstance(pattern, Chain):
        yield from _chain(graph, pattern, t, b, [])
    elif isinstance(pattern, OpPattern):
        producer = None if t is None else graph.tensor_producer(t)
        if producer is not None:
            yield from _node(graph, pattern, producer, t, b)
    else:
        raise TypeError(f"not a pattern: {pattern!r}")


def _node(graph: IrGraph, p: OpPattern, node: IrNode, t: int | None, b: Bindings) -> Iterator[Bindings]:
    if node.op_type not in p.op_types or node.domain != p.domain:
        return
    if t is not None and p.output is not None and node.outputs[p.output] != t:
        return
    if p.where is not None and not p.where(graph, node):
        return
    if not p.extra_inputs and any(i is not None for i in node.inputs[len(p.inputs) :]):
        return
    attributes = _attributes(p, node, b)
    if attributes is None:
        return
    b = attributes
    if p.name is not None:
        bound = b.get(p.name)
        if bound is not None and bound.id != node.id:
            return
        b = {**b, p.name: node}
        if p.output is None and t is not None:
            b[f"{p.name}_output"] = node.outputs.index(t)
    b = {**b, _NODES: (*b[_NODES], (node, p))}
    inputs = [node.inputs[i] if i < len(node.inputs) else None for i in range(len(p.inputs))]
    orders = [inputs, [inputs[1], inputs[0]]] if p.commute and len(inputs) == 2 else [inputs]
    for order in orders:
        yield from _inputs(graph, p.inputs, order, b)


def _inputs(
    graph: IrGraph, patterns: tuple[Pattern | None, ...], tensors: list[int | None], b: Bindings
) -> Iterator[Bindings]:
    if not patterns:
        yield b
        return
    for found in _value(graph, patterns[0], tensors[0], b):
        yield from _inputs(graph, patterns[1:], tensors[1:], found)


def _chain(graph: IrGraph, p: Chain, t: int | None, b: Bindings, steps: list[IrNode]) -> Iterator[Bindings]:
    matched = False
    for found in _value(graph, p.end, t, b):
        matched = True
        yield from _bind(found, p.name, steps[::-1])
    producer = None if t is None else graph.tensor_producer(t)
    if matched or producer is None or len(steps) >= p.max_length:
        return
    index = p.step(graph, producer)
    if index is not None:
        b = {**b, _NODES: (*b[_NODES], (producer, None))}
        yield from _chain(graph, p, producer.inputs[index], b, [*steps, producer])


def _attributes(p: OpPattern, node: IrNode, b: Bindings) -> Bindings | None:
    for key, spec in p.attrs:
        if isinstance(spec, Attr):
            value = node.attributes.get(key, spec.default)
            if value is MISSING or (spec.where is not None and not spec.where(value)):
                return None
            if spec.name is not None:
                b = {**b, spec.name: value}
        elif callable(spec):
            if not spec(node.attributes.get(key)):
                return None
        elif not _equal(node.attributes.get(key, MISSING), spec):
            return None
    return b


def _equal(value: Any, expected: Any) -> bool:
    if value is MISSING:
        return False
    if isinstance(value, bytes):
        value = value.decode()
    return bool(np.array_equal(np.asarray(value), np.asarray(expected)))


def _bind(b: Bindings, name: str | None, value: Any) -> Iterator[Bindings]:
    if name is None:
        yield b
    elif name not in b:
        yield {**b, name: value}
    elif b[name] == value:
        yield b


def _unique(nodes: list[IrNode]) -> list[IrNode]:
    return list({n.id: n for n in nodes}.values())
