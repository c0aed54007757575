"""``min``/``max`` dim expressions (Slice clamps over symbolic dims): evaluation, printing, parsing, collapsing.

A clamp must evaluate exactly at every size, print in a form `SymbolicExpr.parse` reads back (plans and
errors show dims as text), and collapse where its answer is the same for every size (names are sizes,
>= 0), so in-range windows keep the plain sums that other shapes compare equal with.
"""

import pytest

from onyxia.core import SymbolicError, SymbolicExpr

N, PAST = SymbolicExpr.name("n"), SymbolicExpr.name("past")


@pytest.mark.parametrize(
    ("text", "bindings", "expected"),
    [
        ("min(n, 10)", {"n": 4}, 4),
        ("min(n, 10)", {"n": 40}, 10),
        ("max(0, n - 5)", {"n": 3}, 0),
        ("max(0, n - 5) * 2 + min(a, b)", {"n": 9, "a": 3, "b": 2}, 10),
        ("min(max(n, 2), 7) / 2", {"n": 20}, 3),
        ("min + 1", {"min": 4}, 5),  # a dim named min is still a name
    ],
)
def test_clamps_parse_and_evaluate(text: str, bindings: dict[str, int], expected: int) -> None:
    assert SymbolicExpr.parse(text).evaluate(bindings) == expected


def test_clamps_print_as_calls_that_parse_back_and_do_not_depend_on_operand_order() -> None:
    clamp = SymbolicExpr.binary("min", 10, N)
    assert str(clamp) == "min(10, n)" and clamp == SymbolicExpr.binary("min", N, 10)
    nested = SymbolicExpr.binary("max", SymbolicExpr.binary("min", N, PAST) * 3, N - 2) + 1
    assert SymbolicExpr.parse(str(nested)) == nested
    assert nested.names() == {"n", "past"}
    assert nested.substitute({"n": 5, "past": 2}) == 7


def test_clamps_collapse_where_every_size_agrees() -> None:
    assert SymbolicExpr.binary("min", N, N + PAST) == N  # a window derived from the same dims
    assert SymbolicExpr.binary("max", N + 1, 1) == N + 1
    assert SymbolicExpr.binary("max", 0, N % 4) == N % 4
    assert SymbolicExpr.binary("min", N, N) == N
    assert SymbolicExpr.binary("min", 3, 8) == 3
    assert isinstance(SymbolicExpr.binary("max", 0, N - 1), SymbolicExpr)  # n may be 0: no collapse


def test_adding_to_a_clamp_distributes_so_windows_cancel() -> None:
    tail_start = SymbolicExpr.binary("max", 0, N - 5)  # x[n][-5:]
    assert N - tail_start == SymbolicExpr.binary("min", N, 5)
    assert (N - tail_start).evaluate({"n": 3}) == 3
    assert tail_start + 5 == SymbolicExpr.binary("max", 5, N)


@pytest.mark.parametrize("text", ["min(a)", "max(a, b", "min(a b)", "a, b"])
def test_malformed_clamps_name_the_string(text: str) -> None:
    with pytest.raises(SymbolicError, match="malformed dim expression"):
        SymbolicExpr.parse(text)
