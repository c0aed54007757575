"""Dim strings to `SymbolicExpr`s: the grammar exporters write, plus the ``min(a, b)``/``max(a, b)`` Onyxia writes.

Exporters write ``past_sequence_length + 1`` or ``batch * 4``; Onyxia's own shape rules add clamps
(``min(n, 10)``: a Slice end past a symbolic dim) and print them the same way, so every dim
`str()` produces parses back. A name ``min`` or ``max`` not followed by ``(`` is still a plain name.

The grammar (operators, their precedence, the functions) lives here and `onyxia.core.symbolic` reads it;
the parser builds dims through the two constructors it is handed, so this module imports nothing of
`symbolic` and the two stay acyclic.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from onyxia.core.errors import SymbolicError

__all__ = ["FUNCTIONS", "PRECEDENCE", "parse_dim"]

PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}
FUNCTIONS = ("min", "max")  # written ``min(a, b)``

Name = Callable[[str], Any]  # a symbol -> a dim
Binary = Callable[[str, Any, Any], Any]  # (op or function, a, b) -> a dim

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_.:]*)|(.))")


def parse_dim(text: str, name: Name, binary: Binary) -> Any:
    """Parse a dim string into what `name` and `binary` build (ints stay ints); raises `SymbolicError`
    naming the string and position."""
    tokens = _tokenize(text)
    parser = _Parser(text, tokens, name, binary)
    try:
        result = parser.expression(0)
    except RecursionError:  # the parser recurses per nesting level
        raise SymbolicError(f"dim expression '{text[:40]}...' is nested too deeply to parse") from None
    if parser.pos != len(tokens):
        raise SymbolicError(f"malformed dim expression '{text}': unexpected '{tokens[parser.pos]}'")
    return result


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    stripped = text.rstrip()
    while pos < len(stripped):
        match = _TOKEN.match(stripped, pos)
        assert match is not None
        token = match.group(1) or match.group(2) or match.group(3)
        if match.group(3) and token not in "+-*/%(),":
            raise SymbolicError(f"malformed dim expression '{text}': unexpected character '{token}'")
        tokens.append(token)
        pos = match.end()
    if not tokens:
        raise SymbolicError("malformed dim expression '': empty string")
    return tokens


class _Parser:
    """Precedence climbing over the token list; errors quote the original text."""

    def __init__(self, text: str, tokens: list[str], name: Name, binary: Binary) -> None:
        self.text, self.tokens, self.pos = text, tokens, 0
        self.name, self.binary = name, binary

    def _fail(self, what: str) -> SymbolicError:
        return SymbolicError(f"malformed dim expression '{self.text}': {what}")

    def _expect(self, token: str) -> None:
        if self.pos >= len(self.tokens) or self.tokens[self.pos] != token:
            raise self._fail(f"missing '{token}'")
        self.pos += 1

    def atom(self) -> Any:
        if self.pos >= len(self.tokens):
            raise self._fail("expression ends too early")
        token = self.tokens[self.pos]
        self.pos += 1
        if token == "(":
            inner = self.expression(0)
            self._expect(")")
            return inner
        if token == "-":
            return self.binary("-", 0, self.atom())
        if token.isdigit():
            return int(token)
        if token in FUNCTIONS and self.pos < len(self.tokens) and self.tokens[self.pos] == "(":
            self.pos += 1
            a = self.expression(0)
            self._expect(",")
            b = self.expression(0)
            self._expect(")")
            return self.binary(token, a, b)
        if token[0].isalpha() or token[0] == "_":
            return self.name(token)
        raise self._fail(f"unexpected '{token}'")

    def expression(self, min_precedence: int) -> Any:
        lhs = self.atom()
        while self.pos < len(self.tokens):
            op = self.tokens[self.pos]
            if op not in PRECEDENCE or PRECEDENCE[op] < min_precedence:
                break
            self.pos += 1
            rhs = self.expression(PRECEDENCE[op] + 1)
            lhs = self.binary(op, lhs, rhs)
        return lhs
