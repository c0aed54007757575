"""Many dim expressions evaluated together, each distinct sub-expression once, without generated code.

`IncrementalLayout` re-evaluates, per decode step, the few hundred dims that depend on the dims that
moved. Walking each `SymbolicExpr` tree (`evaluate_dim`) costs a Python call per node, and an
expression built as source text and `eval`-ed is code generation the runtime should not need. A
`DimProgram` is the middle road: expressions are flattened once into slots of one list (constants and
names are slots too; equal sub-expressions share a slot, so the ``(total + 63) / 64`` of every layer is
computed once) and a run is one loop of ``vals[out] = op(vals[a], vals[b])`` with `operator` functions.

Semantics are `SymbolicExpr`'s: ``/`` and ``%`` are Python's ``//`` and ``%`` on ints, ``min`` and
``max`` its builtins (Slice clamps), a zero division raises ZeroDivisionError and an unbound name
KeyError (the caller's full path then reports them with the node and tensor named).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from numbers import Integral
from typing import Any

from onyxia.core.errors import SymbolicError
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr

__all__ = ["DimProgram", "Gather", "gather"]

Value = int | None
# A run's values are typed Any: which slots hold ints and which the None constant is known to the
# caller that added them (a binding size may be None), not to the list.
Gather = Callable[[list[Any]], tuple[Any, ...]]

_OPS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.floordiv,
    "%": operator.mod,
    "min": min,
    "max": max,
}


class DimProgram:
    """Slots for dims added with `add`; calling the program with the dims mapping returns every slot's value."""

    def __init__(self) -> None:
        self._template: list[Value] = []  # constants in place, None where a name or an op writes
        self._slots: dict[tuple[str, object], int] = {}
        self._names: list[tuple[int, str]] = []
        self._ops: list[tuple[Callable[[int, int], int], int, int, int]] = []

    def add(self, dim: SymbolicDim | None) -> int:
        """The slot that holds `dim`'s value (None and ints are constants)."""
        if dim is None or isinstance(dim, Integral):
            value = None if dim is None else int(dim)
            return self._slot(("const", value), value)
        if not isinstance(dim, SymbolicExpr):
            raise SymbolicError(f"DimProgram.add(): expected an int, None or SymbolicExpr, found {dim!r}")
        key = ("expr", dim)
        if key in self._slots:
            return self._slots[key]
        if dim.is_name:
            slot = self._slot(key, None)
            self._names.append((slot, str(dim.args[0])))
            return slot
        a, b = (self.add(x) for x in dim.operands)
        slot = self._slot(key, None)
        self._ops.append((_OPS[dim.op], a, b, slot))
        return slot

    def add_all(self, dims: Sequence[SymbolicDim | None]) -> tuple[int, ...]:
        return tuple(self.add(d) for d in dims)

    def __call__(self, dims: Mapping[str, int]) -> list[Any]:
        vals: list[Any] = self._template.copy()  # an op's operands are never the None constant
        for slot, name in self._names:
            vals[slot] = dims[name]
        for op, a, b, out in self._ops:
            vals[out] = op(vals[a], vals[b])
        return vals

    def __len__(self) -> int:
        return len(self._template)

    def _slot(self, key: tuple[str, object], value: Value) -> int:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = len(self._template)
            self._template.append(value)
        return slot


def gather(slots: Sequence[int]) -> Gather:
    """A function of a run's values returning the tuple at `slots` (`operator.itemgetter`, which
    returns a bare value for one index, so that case and the empty one are spelled out)."""
    if len(slots) >= 2:
        return operator.itemgetter(*slots)
    if len(slots) == 1:
        only = slots[0]
        return lambda vals: (vals[only],)
    return lambda vals: ()
