"""`RewritePass`: any table of `Rule`s, applied by one worklist driver to a fixed point.

Rules are indexed by their anchor op, so a node is offered only the rules that can start at it.
Each iteration walks every node once, in graph order; after a rewrite the new nodes, their
consumers and the producers of their inputs go back on the worklist (a fusion upstream can make a
new match downstream and the other way round), and iterations repeat until one applies nothing —
the MLIR greedy driver's scheme, linear in graph size times the (small) number of iterations. A
rule set that keeps applying is an error naming its rules, never a hang.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Mapping

from onyxia.core.errors import OnyxiaError
from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode, TensorRef
from onyxia.core.passes import Stage
from onyxia.core.registry import OperatorRegistry
from onyxia.core.rewrite.match import Decline, Match
from onyxia.core.rewrite.matching import match_pattern
from onyxia.core.rewrite.patterns import OpPattern
from onyxia.core.rewrite.rewriter import NewValue, Rewriter
from onyxia.core.rewrite.rule import Replacement, Rule
from onyxia.core.settings import settings

__all__ = ["MAX_ITERATIONS", "RewritePass", "try_rule"]

log = logging.getLogger(__name__)

MAX_ITERATIONS = 16


class RewritePass:
    """Apply `rules` to a fixed point; True when any rule applied. `last_rewrites` counts the
    applications of the last run (the pipeline's pass statistics read it)."""

    name = "Rewrite"
    stage = Stage.OPTIMIZATION
    rules: tuple[Rule, ...] = ()

    def __init__(self, rules: tuple[Rule, ...] | None = None, *, name: str | None = None, stage: Stage | None = None):
        if rules is not None:
            self.rules = tuple(rules)
        if name is not None:
            self.name = name
        if stage is not None:
            self.stage = stage
        self.last_rewrites = 0
        self._index: dict[tuple[str, str], list[Rule]] = {}
        for rule in self.rules:
            for anchor in rule.anchors:
                self._index.setdefault(anchor, []).append(rule)

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        fired: Counter[str] = Counter()
        declined: set[tuple[str, int]] = set()
        for _ in range(MAX_ITERATIONS):
            if not self._drain(graph, registry, fired, declined):
                break
        else:
            raise OnyxiaError(f"{self.name}: rules {sorted(fired)} still applied after {MAX_ITERATIONS} iterations")
        log.info("%s: %s", self.name, ", ".join(f"{r} x{n}" for r, n in sorted(fired.items())) or "nothing matched")
        self.last_rewrites = sum(fired.values())
        return bool(fired)

    def _drain(
        self, graph: IrGraph, registry: OperatorRegistry, fired: Counter[str], declined: set[tuple[str, int]]
    ) -> int:
        """One iteration: every node once, plus what each rewrite touched. Returns rewrites applied."""
        queue = deque(n.id for n in graph.nodes if (n.domain, n.op_type) in self._index)
        queued = set(queue)
        limit, applied = 4 * len(graph) + 64, 0
        while queue:
            nid = queue.popleft()
            queued.discard(nid)
            node = _alive(graph, nid)
            if node is None:
                continue
            for rule in self._index.get((node.domain, node.op_type), ()):
                result = try_rule(rule, graph, node, registry)
                if isinstance(result, Decline):
                    if (rule.name, node.id) not in declined:
                        declined.add((rule.name, node.id))
                        _log_decline(self.name, rule, graph, node, result)
                    continue
                if result is None:
                    continue
                fired[rule.name] += 1
                applied += 1
                if applied > limit:
                    raise OnyxiaError(f"{self.name}: rules {sorted(fired)} still applied after {limit} rewrites")
                for touched in _neighbours(graph, result):
                    if touched.id not in queued and (touched.domain, touched.op_type) in self._index:
                        queue.append(touched.id)
                        queued.add(touched.id)
                break
        return applied


def try_rule(rule: Rule, graph: IrGraph, node: IrNode, registry: OperatorRegistry) -> list[IrNode] | Decline | None:
    """Match `rule` at `node`, check it and apply its replacement: the new nodes, a `Decline`, or None."""
    pattern = rule.pattern
    m = match_pattern(graph, pattern, node) if isinstance(pattern, OpPattern) else pattern.match(graph, node)
    if m is None:
        return None
    if rule.check is not None and (declined := rule.check(graph, m)) is not None:
        return declined
    r = Rewriter(graph, m)
    replacement = rule.rewrite(r, m)
    if replacement is None:
        return None
    return r.commit(_as_mapping(m, replacement), registry)


def _as_mapping(m: Match, replacement: Replacement) -> Mapping[int, TensorRef | NewValue]:
    """A sequence replaces the anchor's outputs in order (None: that output is not replaced)."""
    if isinstance(replacement, Mapping):
        return replacement
    pairs = zip(m.node.outputs, replacement, strict=False)
    return {old: new for old, new in pairs if old is not None and new is not None}


def _neighbours(graph: IrGraph, created: list[IrNode]) -> list[IrNode]:
    """The new nodes, who reads their outputs and who produces their inputs."""
    out: list[IrNode] = list(created)
    for node in created:
        out += [c for t in node.outputs if t is not None for c, _ in graph.tensor_consumers(t)]
        out += [p for t in node.inputs if t is not None and (p := graph.tensor_producer(t)) is not None]
    return out


def _alive(graph: IrGraph, nid: int) -> IrNode | None:
    try:
        return graph.node(nid)
    except KeyError:
        return None


def _log_decline(pass_name: str, rule: Rule, graph: IrGraph, node: IrNode, decline: Decline) -> None:
    culprit = decline.culprit
    if isinstance(culprit, IrNode):
        culprit = graph.format_node(culprit)
    detail = f" ({culprit})" if culprit is not None else ""
    level = logging.WARNING if settings().debug >= 2 else logging.DEBUG
    log.log(level, "%s: rule %s declined at '%s': %s%s", pass_name, rule.name, node.name, decline.reason, detail)
