"""`Rule` and `RewritePass`: rewrites as data, one matching loop for all of them.

A rule is a module-level value: the op types it anchors on, a `match(graph, node)` and a
`rewrite(graph, match)`. `match` answers one of three ways:

- a `Match` (the anchor node plus the named values the rewrite needs): apply it;
- a `Decline(reason, culprit)`: the pattern is there but a check failed (an epsilon, a dtype, a
  second use); logged once per run at DEBUG, and as a warning at ``ONYXIA_DEBUG>=2``;
- None: not this pattern, silently.

`RewritePass(name, rules)` (or a subclass setting `name` and `rules`) tries every rule on every
node, in graph order, sweeping until no rule applies; nobody writes their own matching loop.
The helpers below (`producer`, `sole_use`, `is_folded`) are what most matches start with.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from onyxia.core import IrGraph, IrNode, OnyxiaError, OperatorRegistry, Stage
from onyxia.core.ir import TensorRef

__all__ = ["Decline", "Match", "RewritePass", "Rule", "is_folded", "producer", "sole_use"]

log = logging.getLogger(__name__)

MAX_SWEEPS = 16


@dataclass(frozen=True)
class Decline:
    """Why a rule that recognised its pattern did not apply, and the node or value at fault."""

    reason: str
    culprit: object = None


class Match(SimpleNamespace):
    """The anchor `node` plus whatever the match bound (``Match(node, add=add, skip=t)``)."""

    def __init__(self, node: IrNode, **bindings: Any) -> None:
        super().__init__(node=node, **bindings)


@dataclass(frozen=True)
class Rule:
    """`anchors`: the op types (in `domain`) the rule is tried on; None tries it on every node.
    `targets` names the exporter shape the rule is for (shown in logs and docs)."""

    name: str
    anchors: Collection[str] | None
    match: Callable[[IrGraph, IrNode], Match | Decline | None]
    rewrite: Callable[[IrGraph, Match], None]
    targets: str = ""
    domain: str = ""

    def applies_to(self, node: IrNode) -> bool:
        return (self.anchors is None or node.op_type in self.anchors) and node.domain == self.domain


class RewritePass:
    """Apply `rules` to a fixed point; returns True when any rule fired. `last_rewrites` is how many
    rule applications the last run made (the pipeline's pass statistics read it)."""

    name = "Rewrite"
    stage = Stage.OPTIMIZATION
    rules: tuple[Rule, ...] = ()
    last_rewrites = 0

    def __init__(self, rules: tuple[Rule, ...] | None = None, *, name: str | None = None) -> None:
        if rules is not None:
            self.rules = tuple(rules)
        if name is not None:
            self.name = name

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        fired: Counter[str] = Counter()
        declined: set[tuple[str, int]] = set()
        for _ in range(MAX_SWEEPS):
            if not self._sweep(graph, fired, declined):
                break
        else:
            raise OnyxiaError(f"{self.name}: rules {sorted(fired)} still applied after {MAX_SWEEPS} sweeps")
        log.info("%s: %s", self.name, ", ".join(f"{r} x{n}" for r, n in sorted(fired.items())) or "nothing matched")
        self.last_rewrites = sum(fired.values())
        return bool(fired)

    def _sweep(self, graph: IrGraph, fired: Counter[str], declined: set[tuple[str, int]]) -> int:
        applied = 0
        for node in graph.nodes:
            for rule in self.rules:
                if not _alive(graph, node) or not rule.applies_to(node):
                    continue
                result = rule.match(graph, node)
                if isinstance(result, Decline):
                    if (rule.name, node.id) not in declined:
                        declined.add((rule.name, node.id))
                        _log_decline(self.name, rule, graph, node, result)
                    continue
                if result is not None:
                    rule.rewrite(graph, result)
                    fired[rule.name] += 1
                    applied += 1
        return applied


# ----- helpers for matches ---------------------------------------------------------------
def producer(graph: IrGraph, tensor: TensorRef | None, op_types: Collection[str], domain: str = "") -> IrNode | None:
    """The node producing `tensor` when its op type is one of `op_types` (in `domain`)."""
    node = None if tensor is None else graph.tensor_producer(tensor)
    return node if node is not None and node.op_type in op_types and node.domain == domain else None


def sole_use(graph: IrGraph, tensor: TensorRef) -> IrNode | None:
    """The one node reading `tensor`, when it has exactly one use and nothing else sees it (not a
    graph output, not shared storage): a rewrite may then change or drop it freely."""
    uses = graph.tensor_consumers(tensor)
    tid = graph.tensor(tensor).id
    if len(uses) != 1 or graph.is_graph_output(tid) or tid in graph.aliases or tid in graph.aliases.values():
        return None
    return uses[0][0]


def is_folded(graph: IrGraph, node: IrNode) -> bool:
    """All outputs known at compile time: the node emits no GPU step, so rewriting it gains nothing."""
    return all(t is None or graph.tensor(t).value is not None for t in node.outputs)


def _alive(graph: IrGraph, node: IrNode) -> bool:
    try:
        return graph.node(node.id) is node
    except KeyError:
        return False


def _log_decline(pass_name: str, rule: Rule, graph: IrGraph, node: IrNode, decline: Decline) -> None:
    culprit = decline.culprit
    if isinstance(culprit, IrNode):
        culprit = graph.format_node(culprit)
    detail = f" ({culprit})" if culprit is not None else ""
    level = logging.WARNING if int(os.environ.get("ONYXIA_DEBUG", "0") or 0) >= 2 else logging.DEBUG
    log.log(level, "%s: rule %s declined at '%s': %s%s", pass_name, rule.name, node.name, decline.reason, detail)
