"""Patterns: what a rewrite rule looks for, written as data that reads like the subgraph it matches.

A pattern describes a tensor by how it is produced, the way tinygrad's `UPat` and onnxscript's
pattern functions do::

    x, w = Var("x"), Var("w")
    op.MatMul(x, op.Transpose(w, perm=Attr("perm")))          # MatMul(x, Transpose(w))
    ms.RotaryEmbedding(op.Reshape(AnyOf(op.Cast(n), n)), ...)  # an optional Cast

- `Var(name)` binds any tensor (the same name twice must bind the same tensor); `Var()` is a wildcard;
- `Const(name)` binds a tensor whose value is known at compile time;
- `op.X(...)` / `ms.X(...)` / `Ops(domain).X(...)` is an `OpPattern`: the tensor is an output of an X
  node whose inputs match the given patterns and whose attributes match `Attr` captures, literal
  values or predicates. ``_name="add"`` binds the node, ``_commute=True`` also tries the two inputs
  swapped, ``_shared=True`` lets the node's outputs have uses outside the match (else they must not:
  the node disappears with the rewrite), ``_output=None`` accepts any output (bound as ``<name>_output``);
- `AnyOf(a, b)` matches the first alternative that fits (optional Casts: ``AnyOf(op.Cast(x), x)``);
- `Chain(name, step, end)` walks zero or more single-input steps (layout-free ops between two
  Transposes) until `end` matches.

Patterns match upstream from the rule's anchor, along use-def edges, never by names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode, TensorDef

__all__ = ["MISSING", "AnyOf", "Attr", "Chain", "Const", "OpPattern", "Ops", "Pattern", "Var", "ms", "op"]

MISSING: Any = object()  # an attribute the node does not set and the pattern gives no default for


class Pattern:
    """Base of the value patterns: each describes one tensor (or an absent optional input)."""


@dataclass(frozen=True, eq=False)
class Var(Pattern):
    """Any tensor; named ones are bound. `where` narrows it (dtype, rank, ...)."""

    name: str | None = None
    where: Callable[[TensorDef], bool] | None = None


@dataclass(frozen=True, eq=False)
class Const(Pattern):
    """A tensor known at compile time (folded value or initializer); bound by name."""

    name: str | None = None


@dataclass(frozen=True, eq=False)
class AnyOf(Pattern):
    options: tuple[Pattern, ...]

    def __init__(self, *options: Pattern) -> None:
        object.__setattr__(self, "options", options)


@dataclass(frozen=True, eq=False)
class Chain(Pattern):
    """Zero or more nodes, each continuing through the input `step(graph, node)` names (None: not a
    step), ending where `end` matches. Binds `name` to the steps, innermost first; each step is
    private to the match like any matched node."""

    name: str
    step: Callable[[IrGraph, IrNode], int | None]
    end: Pattern
    max_length: int = 16


@dataclass(frozen=True, eq=False)
class Attr:
    """Captures an attribute's value (or `default` when the node does not set it) under `name`;
    `where` must accept the value for the pattern to match."""

    name: str | None = None
    default: Any = MISSING
    where: Callable[[Any], bool] | None = None


@dataclass(frozen=True, eq=False)
class OpPattern(Pattern):
    op_types: frozenset[str]
    domain: str = ""
    inputs: tuple[Pattern | None, ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()
    name: str | None = None
    output: int | None = 0
    commute: bool = False
    shared: bool = False
    extra_inputs: bool = False
    where: Callable[[IrGraph, IrNode], bool] | None = field(default=None)

    @property
    def anchors(self) -> frozenset[tuple[str, str]]:
        return frozenset((self.domain, t) for t in self.op_types)


class Ops:
    """``Ops(domain).Name(*inputs, attr=..., _name=..., ...)`` builds an `OpPattern` for op Name.

    ``Ops(domain).any_of(("A", "B"), ...)`` accepts several op types. Options: ``_name``, ``_output``,
    ``_commute``, ``_shared``, ``_extra_inputs`` (inputs beyond those listed are allowed) and
    ``_where(graph, node) -> bool``."""

    def __init__(self, domain: str = "") -> None:
        self._domain = domain

    def any_of(self, op_types: tuple[str, ...], *inputs: Pattern | None, **kwargs: Any) -> OpPattern:
        options = {k[1:]: kwargs.pop(k) for k in list(kwargs) if k.startswith("_")}
        return OpPattern(frozenset(op_types), self._domain, tuple(inputs), tuple(sorted(kwargs.items())), **options)

    def __getattr__(self, op_type: str) -> Callable[..., OpPattern]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        return lambda *inputs, **kwargs: self.any_of((op_type,), *inputs, **kwargs)


op = Ops("")
ms = Ops("com.microsoft")
