"""RewritePass: rules apply to a fixed point, declines are logged with their reason (a warning at
ONYXIA_DEBUG>=2), and a rule set that never settles is an error naming the rules."""

from __future__ import annotations

import logging

import pytest

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph, IrNode, OnyxiaError
from onyxia.operators import core_operator_registry
from onyxia.operators.passes.rewrite import Decline, Match, RewritePass, Rule, producer, sole_use

REGISTRY = core_operator_registry()


def _match_double_neg(graph: IrGraph, node: IrNode) -> Match | Decline | None:
    inner = producer(graph, node.inputs[0], ("Neg",))
    if inner is None:
        return None
    if sole_use(graph, node.inputs[0]) is None:  # type: ignore[arg-type]
        return Decline("the inner Neg has other uses", inner)
    return Match(node, x=inner.inputs[0], inner=inner)


def _drop_double_neg(graph: IrGraph, m: Match) -> None:
    graph.replace_node(m.node, "Identity", [m.x])
    graph.remove_node(m.inner)
    graph.remove_tensor(m.inner.outputs[0])


DOUBLE_NEG = Rule("drop_double_neg", ("Neg",), _match_double_neg, _drop_double_neg, targets="a test pattern")


def _negs(count: int, *, shared: bool = False) -> GraphBuilder:
    b = GraphBuilder("negs")
    t = b.input("x", DataType.FLOAT, [4])
    for _ in range(count):
        t = b.op("Neg", t)
        if shared:
            b.output(t)
    b.output(t)
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b


def test_applies_rules_until_none_match() -> None:
    b = _negs(4)
    assert RewritePass((DOUBLE_NEG,), name="Negs").run(b.graph, REGISTRY)
    assert [n.op_type for n in b.graph] == ["Identity", "Identity"]
    assert not RewritePass((DOUBLE_NEG,)).run(b.graph, REGISTRY)


@pytest.mark.parametrize(("debug", "level"), [("0", "DEBUG"), ("2", "WARNING")])
def test_a_decline_is_logged_once_with_its_reason(
    debug: str, level: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONYXIA_DEBUG", debug)
    b = _negs(2, shared=True)
    before = str(b.graph)
    with caplog.at_level(logging.DEBUG, logger="onyxia.operators.passes.rewrite"):
        assert not RewritePass((DOUBLE_NEG,), name="Negs").run(b.graph, REGISTRY)
    assert str(b.graph) == before
    declines = [r for r in caplog.records if "declined" in r.getMessage()]
    assert len(declines) == 1 and declines[0].levelname == level
    assert "Negs: rule drop_double_neg declined at 'Neg_1': the inner Neg has other uses" in declines[0].getMessage()


def test_a_rule_set_that_never_settles_is_an_error() -> None:
    flip = Rule(
        "flip",
        ("Relu",),
        lambda graph, node: Match(node),
        lambda graph, m: graph.replace_node(m.node, "Relu", list(m.node.inputs)),
    )
    b = GraphBuilder("loop")
    b.output(b.op("Relu", b.input("x", DataType.FLOAT, [2])))
    with pytest.raises(OnyxiaError, match=r"Loop: rules \['flip'\] still applied after 16 sweeps"):
        RewritePass((flip,), name="Loop").run(b.graph, REGISTRY)
