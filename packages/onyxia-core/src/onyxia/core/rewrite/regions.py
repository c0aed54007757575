"""Root patterns a tree of `OpPattern`s cannot spell: a region grown to any size, a set of siblings.

- `Cluster`: the anchor and the producers above it that are members and feed only the region —
  chains and diamonds of elementwise ops that one generated kernel computes. Growth is a worklist
  over use-def edges with the read budget kept incrementally, so a region costs time linear in its
  size, and a node is a region's root only where its consumers cannot take it in.
- `Siblings`: nodes of the anchor's op reading the same tensor at the same input with equal keys
  (q/k/v projections of one hidden state), anchored on the first in graph order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode
from onyxia.core.rewrite.match import Match, private_outputs

__all__ = ["Cluster", "Siblings"]


@dataclass(frozen=True, eq=False)
class Cluster:
    """`member(graph, node)`: may join; `reads(node)`: the input indices the kernel reads from memory;
    at most `max_reads` distinct tensors from outside. Binds `members` in graph order, root last."""

    anchors: frozenset[tuple[str, str]]
    member: Callable[[IrGraph, IrNode], bool]
    reads: Callable[[IrNode], Iterable[int]]
    max_reads: int

    def match(self, graph: IrGraph, node: IrNode) -> Match | None:
        if not self.member(graph, node) or not self._is_root(graph, node):
            return None
        members = self._grow(graph, node)
        if len(members) < 2:
            return None
        ordered = _topological(members)
        return Match(node, nodes=[node, *ordered[:-1]], members=ordered)

    def _is_root(self, graph: IrGraph, node: IrNode) -> bool:
        """Not a root when every use is by would-be members: their region takes this node in."""
        uses = [n for t in node.outputs if t is not None for n, _ in graph.tensor_consumers(t)]
        inside = {n.id for n in uses}
        return not (uses and private_outputs(graph, node, inside) and all(self.member(graph, n) for n in uses))

    def _reads_of(self, node: IrNode) -> set[int]:
        return {t for i in self.reads(node) if i < len(node.inputs) and (t := node.inputs[i]) is not None}

    def _grow(self, graph: IrGraph, root: IrNode) -> dict[int, IrNode]:
        members = {root.id: root}
        produced = {t for t in root.outputs if t is not None}
        external = self._reads_of(root)
        pending = [t for t in root.inputs if t is not None]
        while pending:
            p = graph.tensor_producer(pending.pop())
            if p is None or p.id in members or not self.member(graph, p):
                continue
            if not private_outputs(graph, p, members):
                continue  # read outside the region (for now: a later member may be its last user)
            outputs = {t for t in p.outputs if t is not None}
            grown = (external - outputs) | (self._reads_of(p) - produced - outputs)
            if len(grown) > self.max_reads:
                continue
            members[p.id] = p
            produced |= outputs
            external = grown
            pending += [t for t in p.inputs if t is not None]
        return members


def _topological(members: dict[int, IrNode]) -> list[IrNode]:
    """Members with producers first: Kahn's order over the edges inside the region, the oldest
    ready node first (ids follow the model file's order), without a walk of the whole graph."""
    made = {t: n.id for n in members.values() for t in n.outputs if t is not None}
    waiting = {n.id: len({made[t] for t in n.inputs if t in made}) for n in members.values()}
    users: dict[int, set[int]] = {nid: set() for nid in members}
    for n in members.values():
        for producer in {made[t] for t in n.inputs if t in made}:
            users[producer].add(n.id)
    order: list[IrNode] = []
    ready = [nid for nid, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    while ready:
        nid = heapq.heappop(ready)
        order.append(members[nid])
        for user in users[nid]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    return order


@dataclass(frozen=True, eq=False)
class Siblings:
    """`key(graph, node)`: what members must share (None: cannot join); `fits(members)`: the group
    is within the kernel's limits (trailing siblings drop until it is; they form the next group)."""

    anchors: frozenset[tuple[str, str]]
    key: Callable[[IrGraph, IrNode], Hashable | None]
    fits: Callable[[list[IrNode]], bool]
    shared_input: int = 0

    def match(self, graph: IrGraph, node: IrNode) -> Match | None:
        key = self.key(graph, node)
        shared = node.inputs[self.shared_input] if self.shared_input < len(node.inputs) else None
        if key is None or shared is None:
            return None
        siblings = {
            n.id: n
            for n, i in graph.tensor_consumers(shared)
            if i == self.shared_input and (n.op_type, n.domain) == (node.op_type, node.domain)
        }
        members = [n for n in siblings.values() if n.id == node.id or self.key(graph, n) == key]
        if len(members) < 2:
            return None
        members.sort(key=graph.order_key)
        if members[0].id != node.id:
            return None  # the first member anchors the group
        while len(members) > 2 and not self.fits(members):
            members.pop()
        return Match(node, nodes=members, members=members)
