"""A `Loop` that provably runs a small constant number of times is inlined, one body copy per iteration.

A Loop qualifies when all of these hold (anything else is left as it is, for the engine's host-driven Loop):

* its trip count ``M`` is a constant (an initializer or `Constant` of this graph or an enclosing one):
  an int64 scalar with ``1 <= M <= MAX_UNROLLED_TRIPS``;
* its ``cond`` input is empty or a constant true, and the body's cond output is the body's cond input
  (directly or through `Identity` nodes) or a constant true, so every iteration runs;
* every loop-carried initial value is given, and ``M * len(body.node) <= MAX_UNROLLED_NODES``.

Iteration ``t`` is a copy of the body whose ``iter_num`` is the constant ``t``, whose cond input is a
constant true, whose loop-carried inputs are the previous copy's outputs (the Loop's inputs for the
first), and whose every defined name (node outputs, node names, nested graphs' names) is fresh; the
body's initializers are hoisted once into the enclosing graph. Subgraphs inside the body (an If, Scan or
inner Loop) are copied with the body names they read renamed to the copy's. The final loop-carried values
reach the Loop's outputs through `Identity`; each scan output is ``Concat(Unsqueeze(v_t, 0) for t)``.
Nested graphs are processed first, so an inner qualifying Loop is already flat when its parent is inlined.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import onnx
from onnx import helper
from onyxia.onnx.subgraphs import (
    Names,
    constant_values,
    contains_op,
    default_opset,
    graph_attributes,
    is_onnx_op,
    reads,
    rename_node,
    scalar_constant,
)

__all__ = ["MAX_UNROLLED_NODES", "MAX_UNROLLED_TRIPS", "unroll_small_loops"]

MAX_UNROLLED_TRIPS = 16
MAX_UNROLLED_NODES = 4096


def unroll_small_loops(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every qualifying Loop inlined (a copy), or `model` itself when none qualifies."""
    if not contains_op(model.graph, "Loop"):
        return model
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    unroller = _Unroller(Names(copy), default_opset(copy))
    unroller.graph(copy.graph, {})
    return copy if unroller.changed else model


class _Unroller:
    def __init__(self, names: Names, opset: int) -> None:
        self.names = names
        self.opset = opset
        self.changed = False

    def graph(self, graph: onnx.GraphProto, outer_constants: dict[str, np.ndarray]) -> None:
        """Inline the qualifying Loops of `graph` and of every graph nested in it, in place."""
        constants = {**outer_constants, **constant_values(graph)}
        nodes: list[onnx.NodeProto] = []
        for node in graph.node:
            for sub in graph_attributes(node):
                self.graph(sub, constants)
            trips = _trip_count(node, constants) if is_onnx_op(node, "Loop") else None
            if trips is None:
                nodes.append(node)
                continue
            nodes.extend(self.inline(node, trips, graph))
            self.changed = True
        del graph.node[:]
        graph.node.extend(nodes)

    def inline(self, node: onnx.NodeProto, trips: int, graph: onnx.GraphProto) -> list[onnx.NodeProto]:
        """The nodes replacing `node`: `trips` renamed copies of its body, then its outputs."""
        body = next(a.g for a in node.attribute if a.name == "body")
        fresh = self.names.fresh
        base = node.name or f"Loop_{node.output[0] if node.output else ''}"
        n = len(node.input) - 2
        hoisted: dict[str, str] = {}
        for tensor in body.initializer:
            hoisted[tensor.name] = fresh(f"{base}/{tensor.name}")
            moved = graph.initializer.add()
            moved.CopyFrom(tensor)
            moved.name = hoisted[tensor.name]
        nodes: list[onnx.NodeProto] = []
        true = fresh(f"{base}/true")
        nodes.append(scalar_constant(true, np.array(True)))
        carried = list(node.input[2:])
        pieces: list[list[str]] = [[] for _ in body.output[1 + n :]]
        for t in range(trips):
            iteration = fresh(f"{base}/iter_{t}")
            nodes.append(scalar_constant(iteration, np.array(t, np.int64)))
            names = {**hoisted, body.input[0].name: iteration, body.input[1].name: true}
            names.update({value.name: v for value, v in zip(body.input[2:], carried, strict=True)})
            for original in body.node:
                copy = onnx.NodeProto()
                copy.CopyFrom(original)
                rename_node(copy, names, self._suffixed(t))
                nodes.append(copy)
            outputs = [names.get(value.name, value.name) for value in body.output]
            carried = outputs[1 : 1 + n]
            for k, value in enumerate(outputs[1 + n :]):
                pieces[k].append(self._unsqueezed(value, f"{base}/scan_{k}_{t}", nodes))
        for value, out in zip(carried, node.output[:n], strict=True):
            if out:
                nodes.append(helper.make_node("Identity", [value], [out], name=fresh(f"{out}/final")))
        for k, out in enumerate(node.output[n:]):
            if out:
                nodes.append(helper.make_node("Concat", pieces[k], [out], name=fresh(f"{out}/stack"), axis=0))
        return _live(nodes, set(node.output))

    def _suffixed(self, t: int) -> Callable[[str], str]:
        """Fresh names for iteration `t`'s copies: the body's name with ``/iter_t``."""
        return lambda name: self.names.fresh(f"{name}/iter_{t}")

    def _unsqueezed(self, value: str, base: str, nodes: list[onnx.NodeProto]) -> str:
        """`value` with a new leading axis (Unsqueeze's axes are an input from opset 13 on)."""
        out = self.names.fresh(base)
        if self.opset >= 13:
            axes = self.names.fresh(f"{base}/axes")
            nodes.append(scalar_constant(axes, np.array([0], np.int64)))
            nodes.append(helper.make_node("Unsqueeze", [value, axes], [out], name=out))
        else:
            nodes.append(helper.make_node("Unsqueeze", [value], [out], name=out, axes=[0]))
        return out


def _live(nodes: list[onnx.NodeProto], wanted: set[str]) -> list[onnx.NodeProto]:
    """The inlined `nodes` that lead to the Loop's outputs (`wanted`): each copy's cond computation and
    unread iteration numbers go. Every other name they define is fresh, so nothing else reads them."""
    kept: list[onnx.NodeProto] = []
    for node in reversed(nodes):
        if any(name in wanted for name in node.output):
            kept.append(node)
            wanted |= reads(node)
    return kept[::-1]


def _trip_count(node: onnx.NodeProto, constants: dict[str, np.ndarray]) -> int | None:
    """The Loop's exact iteration count when it qualifies (module docstring), else None."""
    body = next((a.g for a in node.attribute if a.name == "body"), None)
    if body is None or len(node.input) < 2 or not node.input[0] or "" in node.input[2:]:
        return None
    if len(body.input) != len(node.input) or len(body.output) < len(node.input) - 1:
        return None
    trips = constants.get(node.input[0])
    if trips is None or trips.dtype != np.int64 or trips.shape != () or not 1 <= int(trips) <= MAX_UNROLLED_TRIPS:
        return None
    if int(trips) * len(body.node) > MAX_UNROLLED_NODES:
        return None
    if node.input[1] and not _is_true(constants.get(node.input[1])):
        return None
    if not _keeps_going(body, constants):
        return None
    return int(trips)


def _keeps_going(body: onnx.GraphProto, outer_constants: dict[str, np.ndarray]) -> bool:
    """Whether the body's cond output is its cond input (through Identities) or a constant true."""
    producers = {out: node for node in body.node for out in node.output}
    constants = {**outer_constants, **constant_values(body)}
    name = body.output[0].name
    for _ in range(len(body.node) + 1):
        if name == body.input[1].name or _is_true(constants.get(name)):
            return True
        producer = producers.get(name)
        if producer is None or not is_onnx_op(producer, "Identity"):
            return False
        name = producer.input[0]
    return False


def _is_true(value: np.ndarray | None) -> bool:
    return value is not None and value.dtype == np.bool_ and value.size == 1 and bool(value.reshape(()))
