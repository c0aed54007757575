"""Topological order of the file's nodes.

ONNX requires nodes to be sorted, but hand-edited and some converted files are not, and the IR
keeps nodes in insertion order as its topological order. A stable sort (smallest file index
first among the ready nodes) leaves an already sorted file exactly as it was.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import onnx
from onyxia.onnx.errors import OnnxError
from onyxia.onnx.subgraphs import implicit_inputs

__all__ = ["topological_order"]


def topological_order(nodes: Sequence[onnx.NodeProto], where: str) -> list[int]:
    """Indices of `nodes`, producers before consumers (also of what a node's subgraphs read); a cycle
    raises naming some of its nodes."""
    producer = {name: i for i, node in enumerate(nodes) for name in node.output if name}
    users: list[list[int]] = [[] for _ in nodes]
    waiting = [0] * len(nodes)
    for i, node in enumerate(nodes):
        for j in {producer[name] for name in [*node.input, *implicit_inputs(node)] if name in producer}:
            users[j].append(i)
            waiting[i] += 1
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for user in users[i]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(nodes):
        stuck = [nodes[i].name or f"{nodes[i].op_type}_{i}" for i, count in enumerate(waiting) if count > 0]
        raise OnnxError(f"{where}: the nodes form a cycle; nodes on or after it: {stuck[:5]}")
    return order
