"""Symbolic dimension expressions such as ``past_sequence_length + sequence_length``.

Exporters write dims as free strings. Shape inference needs to combine them (Concat sums them,
Reshape multiplies them) and the runtime needs to evaluate them once the real sizes are known,
so an expression is a small immutable tree with integer semantics: ``/`` is floor division, ``%``
the non-negative modulo, exactly as sizes behave; ``min``/``max`` clamp (a Slice bound past a
symbolic dim). Literal sub-expressions are folded when built, so equal dims compare equal
structurally, and a ``min``/``max`` whose answer holds for every size (names are sizes, >= 0)
collapses to that side: ``min(seq, past + seq)`` is ``seq``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import Union

from onyxia.core.errors import SymbolicError
from onyxia.core.symbolic_parse import FUNCTIONS, PRECEDENCE, parse_dim

__all__ = ["FUNCTIONS", "PRECEDENCE", "SymbolicDim", "SymbolicExpr", "ceil_div", "evaluate_dim", "simplify_dim"]

SymbolicDim = Union[int, "SymbolicExpr"]


def _apply(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in FUNCTIONS:
        return min(a, b) if op == "min" else max(a, b)
    if b == 0:
        raise SymbolicError(f"division by zero while evaluating '{a} {op} {b}'")
    return a // b if op == "/" else a % b


@dataclass(frozen=True)
class SymbolicExpr:
    """An integer expression over named dims: a name, or ``(op, lhs, rhs)``.

    Build with `SymbolicExpr.parse("a * b")`, `SymbolicExpr.name("a")`, or arithmetic on existing
    expressions and ints (``expr * 4 + 1``); results that become literal collapse to plain ints.
    """

    op: str  # "name", one of + - * / %, or min / max
    args: tuple[SymbolicDim | str, ...]

    # ----- construction -------------------------------------------------------------------
    @staticmethod
    def name(symbol: str) -> SymbolicExpr:
        return SymbolicExpr("name", (symbol,))

    @staticmethod
    def parse(text: str) -> SymbolicDim:
        """Parse a dim string; raises `SymbolicError` naming the string and position."""
        return parse_dim(text, SymbolicExpr.name, SymbolicExpr.binary)  # type: ignore[no-any-return]

    @staticmethod
    def binary(op: str, a: SymbolicDim, b: SymbolicDim) -> SymbolicDim:
        """Combine two dims into canonical form: sums of products are normalised as polynomials
        (so ``past + seq - past`` is ``seq``), exact divisions cancel, literals fold."""
        a, b = _as_dim(a), _as_dim(b)
        if isinstance(a, int) and isinstance(b, int):
            return _apply(op, a, b)
        if op in FUNCTIONS:
            return _min_max(op, a, b)
        if op in "+-" and _is_clamp(a) != _is_clamp(b):  # x - max(p, q) is min(x - p, x - q): clamps cancel
            if isinstance(a, SymbolicExpr) and a.op in FUNCTIONS:
                p, q = a.operands
                return SymbolicExpr.binary(a.op, SymbolicExpr.binary(op, p, b), SymbolicExpr.binary(op, q, b))
            assert isinstance(b, SymbolicExpr)
            p, q = b.operands
            flipped = b.op if op == "+" else FUNCTIONS[1 - FUNCTIONS.index(b.op)]
            return SymbolicExpr.binary(flipped, SymbolicExpr.binary(op, a, p), SymbolicExpr.binary(op, a, q))
        if op in "+-*":
            pa, pb = _poly(a), _poly(b)
            if op == "*":
                return _from_poly(_poly_mul(pa, pb))
            return _from_poly(_poly_add(pa, pb, 1 if op == "+" else -1))
        if a == b and b != 0:
            return 1 if op == "/" else 0
        if isinstance(b, int) and b > 0:
            pa = _poly(a)
            if all(c % b == 0 for c in pa.values()):
                return _from_poly({m: c // b for m, c in pa.items()}) if op == "/" else 0
            if b == 1:
                return a if op == "/" else 0
        return SymbolicExpr(op, (a, b))

    # ----- queries --------------------------------------------------------------------------
    @property
    def is_name(self) -> bool:
        return self.op == "name"

    @property
    def operands(self) -> tuple[SymbolicDim, SymbolicDim]:
        """The two sides of a binary node (`args` also holds a name node's string, hence the check)."""
        a, b = self.args
        if isinstance(a, str) or isinstance(b, str):
            raise SymbolicError(f"'{self}' is a name, not a binary expression: it has no operands")
        return a, b

    def names(self) -> set[str]:
        if self.is_name:
            return {str(self.args[0])}
        found: set[str] = set()
        for arg in self.args:
            if isinstance(arg, SymbolicExpr):
                found |= arg.names()
        return found

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        """Evaluate fully; raises `SymbolicError` for an unbound name."""
        result = self.substitute(bindings)
        if not isinstance(result, int):
            missing = ", ".join(sorted(result.names()))
            raise SymbolicError(f"cannot evaluate dim '{self}': no value bound for {missing}")
        return result

    def substitute(self, bindings: Mapping[str, SymbolicDim]) -> SymbolicDim:
        """Replace the names that `bindings` knows; the result is an int once nothing is left."""
        if self.is_name:
            return bindings.get(str(self.args[0]), self)
        a, b = (x.substitute(bindings) if isinstance(x, SymbolicExpr) else x for x in self.operands)
        return SymbolicExpr.binary(self.op, a, b)

    # ----- arithmetic (so shape rules read like math) ----------------------------------------
    def __add__(self, other: SymbolicDim) -> SymbolicDim:
        return SymbolicExpr.binary("+", self, other)

    def __radd__(self, other: SymbolicDim) -> SymbolicDim:
        return SymbolicExpr.binary("+", other, self)

    def __sub__(self, other: SymbolicDim) -> SymbolicDim:
        return SymbolicExpr.binary("-", self, other)

    def __rsub__(self, other: SymbolicDim) -> SymbolicDim:
        return SymbolicExpr.binary("-", other, self)

    def __mul__(self, other: SymbolicDim) -> SymbolicDim:
        return SymbolicExpr.binary("*", self, other)

    def __rmul__(self, other: SymbolicDim) -> SymbolicDim:
        return SymbolicExpr.binary("*", other, self)

    def __floordiv__(self, other: SymbolicDim) -> SymbolicDim:
        return SymbolicExpr.binary("/", self, other)

    def __rfloordiv__(self, other: SymbolicDim) -> SymbolicDim:
        return SymbolicExpr.binary("/", other, self)

    def __mod__(self, other: SymbolicDim) -> SymbolicDim:
        return SymbolicExpr.binary("%", self, other)

    def __str__(self) -> str:
        if self.is_name:
            return str(self.args[0])
        if self.op in FUNCTIONS:
            return f"{self.op}({self.args[0]}, {self.args[1]})"
        a, b = (_format_operand(x, self.op, right=i == 1) for i, x in enumerate(self.args))
        return f"{a} {self.op} {b}"

    def __repr__(self) -> str:
        return f"SymbolicExpr({str(self)!r})"


_Monomial = tuple["SymbolicExpr", ...]
_Poly = dict[_Monomial, int]


def _poly(x: SymbolicDim) -> _Poly:
    """A polynomial over atoms (names, and opaque ``/`` or ``%`` nodes)."""
    if isinstance(x, int):
        return {(): x} if x else {}
    if x.op in ("+", "-", "*"):
        a, b = x.operands
        return _poly_mul(_poly(a), _poly(b)) if x.op == "*" else _poly_add(_poly(a), _poly(b), 1 if x.op == "+" else -1)
    return {(x,): 1}


def _poly_add(a: _Poly, b: _Poly, sign: int) -> _Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _poly_mul(a: _Poly, b: _Poly) -> _Poly:
    out: _Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb, key=str))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


def _from_poly(p: _Poly) -> SymbolicDim:
    """Canonical tree: terms by degree then text, positive terms first, constant last."""
    terms = sorted(p.items(), key=lambda t: (t[1] < 0, -len(t[0]), [str(a) for a in t[0]]))
    result: SymbolicDim = 0
    for monomial, coeff in terms:
        term: SymbolicDim = abs(coeff) if not monomial or abs(coeff) != 1 else monomial[0]
        factors = monomial if not monomial or abs(coeff) != 1 else monomial[1:]
        for atom in factors:
            term = atom if term == 1 else SymbolicExpr("*", (term, atom))
        if isinstance(term, int) and isinstance(result, int):
            result = result + term if coeff > 0 else result - term
        elif result == 0 and coeff > 0:
            result = term
        else:
            result = SymbolicExpr("+" if coeff > 0 else "-", (result, term))
    return result


def _as_dim(x: object) -> SymbolicDim:
    """numpy integers (from folded shape tensors) become plain ints so literals keep folding."""
    if isinstance(x, Integral) and not isinstance(x, int):
        return int(x)
    if isinstance(x, (int, SymbolicExpr)):
        return x
    raise SymbolicError(f"dim arithmetic got {x!r} ({type(x).__name__}); expected an int or a SymbolicExpr")


def _format_operand(x: SymbolicDim | str, parent_op: str, right: bool) -> str:
    if isinstance(x, SymbolicExpr) and x.op in PRECEDENCE:
        mine, theirs = PRECEDENCE[x.op], PRECEDENCE[parent_op]
        if mine < theirs or (right and mine == theirs):
            return f"({x})"
    return str(x)


def _is_clamp(x: SymbolicDim) -> bool:
    return isinstance(x, SymbolicExpr) and x.op in FUNCTIONS


def _min_max(op: str, a: SymbolicDim, b: SymbolicDim) -> SymbolicDim:
    """``min``/``max`` of two dims: one side when the sign of ``a - b`` is the same for every size,
    else a node with its operands in text order (so ``min(a, b)`` equals ``min(b, a)``)."""
    low, high = _bounds(SymbolicExpr.binary("-", a, b))
    if high <= 0 or low >= 0:
        return a if (high <= 0) == (op == "min") else b
    first, second = sorted((a, b), key=str)
    return SymbolicExpr(op, (first, second))


def _bounds(x: SymbolicDim) -> tuple[float, float]:
    """An interval holding `x` for every size its names may take (>= 0); loose, never wrong."""
    if isinstance(x, int):
        return x, x
    if x.is_name:
        return 0, math.inf
    (la, ha), (lb, hb) = (_bounds(v) for v in x.operands)
    if x.op == "+":
        return la + lb, ha + hb
    if x.op == "-":
        return la - hb, ha - lb
    if x.op in FUNCTIONS:
        return (min(la, lb), min(ha, hb)) if x.op == "min" else (max(la, lb), max(ha, hb))
    if x.op == "*":
        products = [0 if 0 in (p, q) else p * q for p in (la, ha) for q in (lb, hb)]
        return min(products), max(products)
    if lb == hb and lb > 0:  # / and % by a positive literal
        if x.op == "%":
            return 0, lb - 1
        return (la // lb if la > -math.inf else la), (ha // lb if ha < math.inf else ha)
    return -math.inf, math.inf


def simplify_dim(dim: SymbolicDim, bindings: Mapping[str, SymbolicDim]) -> SymbolicDim:
    """`dim` with the names `bindings` knows replaced (ints pass through)."""
    return dim.substitute(bindings) if isinstance(dim, SymbolicExpr) else dim


def evaluate_dim(dim: SymbolicDim, bindings: Mapping[str, int]) -> int:
    """`dim` as an int under `bindings`; raises `SymbolicError` if a name is unbound."""
    return dim.evaluate(bindings) if isinstance(dim, SymbolicExpr) else dim


def ceil_div(a: SymbolicDim, b: int) -> SymbolicDim:
    """``ceil(a / b)`` for a non-negative dim, symbolic or not: workgroup counts and packed sizes."""
    return (a + (b - 1)) // b
