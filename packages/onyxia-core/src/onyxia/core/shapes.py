"""Tensor shapes: Static, Symbolic or Absent — never Unknown.

A shape Onyxia cannot derive is an error at inference time, not a value that flows on; that is
what lets planning turn every dim into either a shader def (static) or an immediate (symbolic).
`Absent` marks an omitted optional input or output.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Union

from onyxia.core.symbolic import SymbolicDim, SymbolicExpr, simplify_dim

__all__ = ["Absent", "Static", "Symbolic", "TensorShape", "dims_product", "format_dims", "shape_of", "static_dims"]


@dataclass(frozen=True)
class Static:
    """Every dim known."""

    dims: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    def __str__(self) -> str:
        return format_dims(self.dims)


@dataclass(frozen=True)
class Symbolic:
    """Rank known; at least one dim is a `SymbolicExpr` bound only at run time."""

    dims: tuple[SymbolicDim, ...]

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def numel(self) -> SymbolicDim:
        return dims_product(self.dims)

    def __str__(self) -> str:
        return format_dims(self.dims)


@dataclass(frozen=True)
class Absent:
    """An omitted optional input/output (ONNX empty name)."""

    @property
    def rank(self) -> int:
        raise AttributeError("an Absent tensor has no rank")

    def __str__(self) -> str:
        return "absent"


TensorShape = Union[Static, Symbolic, Absent]


def shape_of(dims: Iterable[SymbolicDim], bindings: Mapping[str, SymbolicDim] | None = None) -> Static | Symbolic:
    """The right variant for `dims` (after substituting `bindings`): Static when all are ints."""
    resolved = tuple(simplify_dim(d, bindings or {}) for d in dims)
    for d in resolved:
        if isinstance(d, int) and d < 0:
            raise ValueError(f"negative dim {d} in shape {format_dims(resolved)}")
    ints = static_dims(resolved)
    return Static(ints) if ints is not None else Symbolic(resolved)


def static_dims(dims: Iterable[SymbolicDim]) -> tuple[int, ...] | None:
    """`dims` as ints, or None when one is symbolic: host-side work (a fold, a split) needs numbers.

    A function rather than ``all(isinstance(d, int) ...)``, which type checkers cannot narrow on."""
    dims = tuple(dims)
    ints = tuple(d for d in dims if isinstance(d, int))
    return ints if len(ints) == len(dims) else None


def dims_product(dims: Sequence[SymbolicDim]) -> SymbolicDim:
    result: SymbolicDim = 1
    for d in dims:
        result = SymbolicExpr.binary("*", result, d)
    return result


def format_dims(dims: Sequence[SymbolicDim]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"
