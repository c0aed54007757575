"""The rewrite engine: patterns (Var, Attr, AnyOf, commute, Chain, privacy), Cluster and Siblings, the
Rewriter (ids and names kept, nothing touched on a decline), the worklist driver (fixed point, declines
logged once with their reason, a rule set that never settles is an error) and its near-linear cost."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

from onyxia.core import DataType, GraphBuilder, OnyxiaError, OperatorRegistry
from onyxia.core.call_count import count_calls
from onyxia.core.ir import IrGraph, IrNode
from onyxia.core.rewrite import (
    AnyOf,
    Attr,
    Chain,
    Cluster,
    Decline,
    Match,
    NewValue,
    RewritePass,
    Rewriter,
    Rule,
    Siblings,
    Var,
    op,
)
from onyxia.core.settings import override

REGISTRY = OperatorRegistry()
F32 = DataType.FLOAT


def _identity(r: Rewriter, m: Match) -> list[NewValue]:
    return [r.op("Identity", m.x)]


DOUBLE_NEG = Rule("drop_double_neg", op.Neg(op.Neg(Var("x"))), _identity, targets="a test pattern")


def _negs(count: int, *, shared: bool = False) -> GraphBuilder:
    b = GraphBuilder("negs")
    t = b.input("x", F32, [4])
    for _ in range(count):
        t = b.op("Neg", t)
        if shared:
            b.output(t)
    b.output(t)
    return b


def test_applies_rules_until_none_match_keeping_ids_and_names() -> None:
    b = _negs(4)
    outputs = list(b.graph.outputs)
    assert RewritePass((DOUBLE_NEG,), name="Negs").run(b.graph, REGISTRY)
    assert [n.op_type for n in b.graph] == ["Identity", "Identity"]
    assert b.graph.outputs == outputs and b.graph.nodes[-1].name == "Neg_3"
    b.graph.check()
    assert not RewritePass((DOUBLE_NEG,)).run(b.graph, REGISTRY)


def test_an_inner_node_used_elsewhere_is_not_matched() -> None:
    b = _negs(2, shared=True)
    before = str(b.graph)
    assert not RewritePass((DOUBLE_NEG,)).run(b.graph, REGISTRY)
    assert str(b.graph) == before


@pytest.mark.parametrize(("debug", "level"), [(0, "DEBUG"), (2, "WARNING")])
def test_a_decline_is_logged_once_with_its_reason(debug: int, level: str, caplog: pytest.LogCaptureFixture) -> None:
    refuse = Rule("refuse", op.Neg(Var("x")), _identity, check=lambda g, m: Decline("no reason to", m.node))
    b = _negs(1)
    before = str(b.graph)
    with override(debug=debug), caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite"):
        assert not RewritePass((refuse,), name="Negs").run(b.graph, REGISTRY)
    assert str(b.graph) == before
    declines = [r for r in caplog.records if "declined" in r.getMessage()]
    assert len(declines) == 1 and declines[0].levelname == level
    assert "Negs: rule refuse declined at 'Neg': no reason to" in declines[0].getMessage()


def test_a_replacement_returning_none_changes_nothing() -> None:
    def maybe(r: Rewriter, m: Match) -> list[NewValue] | None:
        r.op("Relu", m.x)
        return None

    b = _negs(2)
    before = str(b.graph)
    assert not RewritePass((Rule("maybe", op.Neg(op.Neg(Var("x"))), maybe),)).run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_a_rule_set_that_never_settles_is_an_error() -> None:
    flip = Rule("flip", op.Relu(Var("x")), lambda r, m: [r.op("Relu", m.x)])
    b = GraphBuilder("loop")
    b.output(b.op("Relu", b.input("x", F32, [2])))
    with pytest.raises(OnyxiaError, match=r"Loop: rules \['flip'\] still applied after"):
        RewritePass((flip,), name="Loop").run(b.graph, REGISTRY)


def _recorder(seen: list[Any], what: Callable[[Match], Any]) -> Callable[[Rewriter, Match], None]:
    """A replacement that records what matched and declines (returns None): the graph stays as it is."""

    def record(r: Rewriter, m: Match) -> None:
        seen.append(what(m))

    return record


def test_commute_attr_and_any_of() -> None:
    """Mul(x, Cast?(Relu(y))) in either operand order, capturing an attribute."""
    relu = op.Relu(Var("y"), _name="relu")
    pattern = op.Mul(Var("x"), AnyOf(op.Cast(relu, to=Attr("to")), relu), _commute=True)
    seen: list[Match] = []
    rule = Rule("see", pattern, _recorder(seen, lambda m: m))
    b = GraphBuilder("g")
    x, y = b.input("x", F32, [2]), b.input("y", F32, [2])
    b.output(b.op("Mul", b.op("Cast", b.op("Relu", y), to=1), x))
    RewritePass((rule,)).run(b.graph, REGISTRY)
    (m,) = seen
    assert (m.x, m.y, m.to, m.relu.op_type) == (x.id, y.id, 1, "Relu")
    assert {n.op_type for n in m.nodes} == {"Mul", "Cast", "Relu"}


def test_a_var_bound_twice_must_be_one_tensor() -> None:
    same = Rule("square", op.Mul(Var("x"), Var("x")), lambda r, m: [r.op("Pow", m.x, m.x)])
    b = GraphBuilder("g")
    x, y = b.input("x", F32, [2]), b.input("y", F32, [2])
    b.output(b.op("Mul", x, y), b.op("Mul", x, x))
    assert RewritePass((same,)).run(b.graph, REGISTRY)
    assert [n.op_type for n in b.graph] == ["Mul", "Pow"]


def test_chain_walks_the_steps_between_two_anchors() -> None:
    def step(graph: IrGraph, node: IrNode) -> int | None:
        return 0 if node.op_type in ("Relu", "Neg") else None

    pattern = op.Exp(Chain("chain", step, op.Log(Var("x"))))
    seen: list[list[str]] = []
    rule = Rule("see", pattern, _recorder(seen, lambda m: [n.op_type for n in m.chain]))
    b = GraphBuilder("g")
    b.output(b.op("Exp", b.op("Neg", b.op("Relu", b.op("Log", b.input("x", F32, [2]))))))
    RewritePass((rule,)).run(b.graph, REGISTRY)
    assert seen == [["Relu", "Neg"]]


def _grouped(r: Rewriter, m: Match) -> dict[int, NewValue]:
    group = r.op("Group", m.node.inputs[0], *(n.inputs[1] for n in m.members), outputs=len(m.members))
    return {n.outputs[0]: out for n, out in zip(m.members, r.outputs_of(group), strict=True)}


def test_siblings_group_in_graph_order_and_split_past_the_limit() -> None:
    rule = Rule("group", Siblings(frozenset({("", "MatMul")}), lambda g, n: "k", lambda ms: len(ms) <= 2), _grouped)
    b = GraphBuilder("g")
    x = b.input("x", F32, [2, 2])
    outs = [b.op("MatMul", x, b.initializer(f"w{i}", np.eye(2, dtype=np.float32))) for i in range(3)]
    b.output(*outs)
    assert RewritePass((rule,)).run(b.graph, REGISTRY)
    assert [(n.op_type, len(n.outputs)) for n in b.graph] == [("Group", 2), ("MatMul", 1)]
    assert b.graph.outputs == [t.id for t in outs]
    b.graph.check()


def _fuse(r: Rewriter, m: Match) -> list[NewValue]:
    inputs = [t for n in m.members for t in n.inputs if t is not None and t not in {n.outputs[0] for n in m.members}]
    return [r.op("Fused", *dict.fromkeys(inputs), steps=len(m.members))]


def _chain_graph(length: int) -> GraphBuilder:
    b = GraphBuilder("chain")
    t = b.input("x", F32, [8])
    for i in range(length):
        t = b.op("Neg", t) if i % 2 else b.op("Add", t, b.initializer(f"c{i}", np.ones(8, np.float32)))
    b.output(t)
    return b


CLUSTER = Rule(
    "cluster",
    Cluster(
        frozenset({("", "Neg"), ("", "Add")}),
        lambda g, n: n.op_type in ("Neg", "Add"),
        lambda n: range(len(n.inputs)),
        max_reads=4,
    ),
    _fuse,
)


def test_cluster_grows_up_to_its_read_budget() -> None:
    b = _chain_graph(12)
    assert RewritePass((CLUSTER,)).run(b.graph, REGISTRY)
    fused = [n for n in b.graph if n.op_type == "Fused"]
    assert all(len(n.inputs) <= 4 for n in fused) and len(b.graph) == len(fused) < 12
    assert sum(n.attributes["steps"] for n in fused) == 12
    b.graph.check()


def test_rewriting_a_long_chain_is_near_linear() -> None:
    """Work per node must not grow with the chain (3k vs 12k nodes), counted in function calls
    (`count_calls`: the same on a loaded machine, unlike seconds); a rescan per rewrite would be ~4x."""
    per_node = []
    for length in (3000, 12000):
        b = _chain_graph(length)
        _, calls = count_calls(partial(RewritePass((CLUSTER,)).run, b.graph, REGISTRY))
        per_node.append(calls / length)
    assert per_node[1] < 1.3 * per_node[0], per_node
