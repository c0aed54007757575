"""`Rule`: a pattern, an optional check and a replacement — one module-level value per rewrite.

The rule answers in three ways, as onnxscript's rewriter and tinygrad's `PatternMatcher` do:
the pattern does not match (silently nothing); it matches but `check` returns a `Decline` with the
reason and the culprit (logged once, at DEBUG, or WARNING with ``ONYXIA_DEBUG>=2``); or it applies,
and `rewrite(r, m)` builds the replacement with the `Rewriter` `r` and returns the new values of the
anchor's outputs (or an ``{old tensor: new}`` mapping), or None to decline after all. The engine
(`RewritePass`) inserts the new nodes, moves every use and removes what the match made dead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode, TensorRef
from onyxia.core.rewrite.match import Decline, Match
from onyxia.core.rewrite.patterns import OpPattern
from onyxia.core.rewrite.rewriter import NewValue, Rewriter

__all__ = ["Replacement", "RootPattern", "Rule"]


class RootPattern(Protocol):
    """A pattern with its own matcher, for shapes a tree of `OpPattern`s cannot spell: a region grown
    to any size (`Cluster`), a set of siblings (`Siblings`)."""

    @property
    def anchors(self) -> frozenset[tuple[str, str]]: ...

    def match(self, graph: IrGraph, node: IrNode) -> Match | None: ...


Replacement = Sequence[TensorRef | NewValue | None] | Mapping[int, TensorRef | NewValue]


@dataclass(frozen=True)
class Rule:
    """`pattern` anchored on its root op; `check(graph, m)` may decline with a reason; `rewrite`
    returns the replacement. `targets` names the exporter shape the rule is for."""

    name: str
    pattern: OpPattern | RootPattern
    rewrite: Callable[[Rewriter, Match], Replacement | None]
    check: Callable[[IrGraph, Match], Decline | None] | None = None
    targets: str = ""

    @property
    def anchors(self) -> frozenset[tuple[str, str]]:
        return self.pattern.anchors
