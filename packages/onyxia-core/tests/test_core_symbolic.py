import pytest

from onyxia.core import SymbolicError, SymbolicExpr, shape_of
from onyxia.core.shapes import Static, Symbolic


@pytest.mark.parametrize(
    ("text", "bindings", "expected"),
    [
        ("sequence_length * num_attention_heads", {"sequence_length": 7, "num_attention_heads": 4}, 28),
        ("a - b - c", {"a": 10, "b": 3, "c": 2}, 5),
        ("(a + 2) * 3 / 2 % 5", {"a": 4}, 4),
        ("past_sequence_length + 1", {"past_sequence_length": 0}, 1),
        ("a / 2", {"a": 7}, 3),
        ("-a + 10", {"a": 3}, 7),
    ],
)
def test_parse_and_evaluate(text: str, bindings: dict[str, int], expected: int) -> None:
    assert SymbolicExpr.parse(text).evaluate(bindings) == expected


def test_literal_subexpressions_fold() -> None:
    assert SymbolicExpr.parse("2 * 3 + 1") == 7
    expr = SymbolicExpr.parse("a * (2 + 2)")
    assert str(expr) == "4 * a"
    assert SymbolicExpr.parse("a * 1 + 0") == SymbolicExpr.name("a")


def test_arithmetic_builds_comparable_expressions() -> None:
    a = SymbolicExpr.name("a")
    assert a * 4 + 1 == SymbolicExpr.parse("a * 4 + 1")
    assert (a - a) == 0
    assert str((a + 1) * 2) == "2 * a + 2"
    assert SymbolicExpr.parse("past + seq - past") == SymbolicExpr.name("seq")
    assert SymbolicExpr.parse("(4 * a) / 4") == a
    assert str(SymbolicExpr.parse("(a + 1) / 2")) == "(a + 1) / 2"
    assert (a * 3).names() == {"a"}


@pytest.mark.parametrize("text", ["a +", "(a", "a $ b", "", "a b", "*"])
def test_malformed_strings_name_the_string(text: str) -> None:
    with pytest.raises(SymbolicError, match="malformed dim expression"):
        SymbolicExpr.parse(text)


def test_unbound_name_is_reported() -> None:
    with pytest.raises(SymbolicError, match="no value bound for seq"):
        SymbolicExpr.parse("batch * seq").evaluate({"batch": 1})


def test_substitute_partially() -> None:
    expr = SymbolicExpr.parse("batch * seq")
    partial = expr.substitute({"batch": 2})
    assert isinstance(partial, SymbolicExpr) and str(partial) == "2 * seq"
    assert partial.substitute({"seq": 5}) == 10


def test_shape_of_picks_the_variant() -> None:
    seq = SymbolicExpr.name("seq")
    assert shape_of([1, 2]) == Static((1, 2))
    assert isinstance(shape_of([1, seq]), Symbolic)
    assert shape_of([1, seq], {"seq": 3}) == Static((1, 3))
    assert shape_of([1, seq]).numel == seq


def test_numpy_integers_fold_like_ints() -> None:
    import numpy as np

    expr = SymbolicExpr.name("n") - np.int64(2)
    assert isinstance(expr, SymbolicExpr)
    assert expr.evaluate({"n": 5}) == 3
    assert SymbolicExpr.binary("+", np.int64(2), np.int32(3)) == 5
