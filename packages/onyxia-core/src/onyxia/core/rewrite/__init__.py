"""Rewrites as data: patterns, rules and the one engine that applies any table of them.

A fusion is a `Rule` value in a table kept beside the operator family whose kernel it produces
(``onyxia.operators.<family>.fusions``); a `RewritePass` applies a table to a fixed point. The
pieces, each in its module: `patterns` (what to look for), `matching` (the matcher), `regions`
(clusters and sibling groups), `match` (`Match`, `Decline`, helpers for checks), `rewriter` (how a
replacement is built and applied), `rule`, `engine` (the worklist driver).
"""

from onyxia.core.rewrite.engine import MAX_ITERATIONS, RewritePass, try_rule
from onyxia.core.rewrite.match import Decline, Match, is_folded, private_outputs, producer, sole_use
from onyxia.core.rewrite.patterns import MISSING, AnyOf, Attr, Chain, Const, OpPattern, Ops, Pattern, Var, ms, op
from onyxia.core.rewrite.regions import Cluster, Siblings
from onyxia.core.rewrite.rewriter import NewValue, Rewriter
from onyxia.core.rewrite.rule import Replacement, RootPattern, Rule

__all__ = [
    "MAX_ITERATIONS",
    "MISSING",
    "AnyOf",
    "Attr",
    "Chain",
    "Cluster",
    "Const",
    "Decline",
    "Match",
    "NewValue",
    "OpPattern",
    "Ops",
    "Pattern",
    "Replacement",
    "Rewriter",
    "RewritePass",
    "RootPattern",
    "Rule",
    "Siblings",
    "Var",
    "is_folded",
    "ms",
    "op",
    "private_outputs",
    "producer",
    "sole_use",
    "try_rule",
]
