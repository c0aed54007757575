"""Plan entries for dims that come from values rather than shapes: graph inputs and GPU results.

A Reshape whose target is a graph input, or a Gather over NonZero's indices, has output dims that
no input *shape* carries. The compiler names each such dim with a fresh symbol, as it names
``sequence_length``, and records here where the runtime finds its value:

- `ValueSymbol`: element `index` of graph input `input` (the host array given to `run()`), bound
  before anything is submitted, with no readback;
- `ReadValues` (a plan step, in `onyxia.core.plan`): after the steps before it have run, the
  runtime reads a few i32 words of `src` back and binds them, then runs the rest of the plan
  through the same dims update that `update_dimensions` does (no shader is rebuilt). Its cost is
  one extra submit and map per step.

Where the symbols feed a Reshape target, Slice bounds or a Range directly, a `ValueFill` says how
the raw values become the sizes: the binder resolves a target's ``-1`` and ``0`` and clamps bounds
as ONNX does, on the host (it has the raw values and the data's dims), so the symbols stand for
the sizes, exactly as a constant target's -1 is solved at compile time.

A value that shapes a kernel rather than a size (a Reduce axis from a graph input) cannot be a
symbol: the plan is made for the value instead. The symbols of such an input are *compiled dims*
(`SPECIALIZED_OFFSET`); the first compile, with no value, yields a deferred plan with no steps,
and the runtime asks the plan's replanner for the plan of each value it meets (cached by value).

`ValueCheck`s are the assumptions a shape rule made about such a value (a Reshape size is at
least 1, a Slice bound lies inside its axis); the runtime checks them when the value is bound, so
a value the plan cannot honour is an error naming the node and input, never a wrong shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core.errors import InputError
from onyxia.core.symbolic import SymbolicDim

__all__ = [
    "SPECIALIZED_OFFSET",
    "UNSPECIALIZED",
    "ValueCheck",
    "ValueFill",
    "ValueSymbol",
    "fill_values",
    "specialized_dim",
    "specialized_value",
]


@dataclass(frozen=True)
class ValueSymbol:
    """Graph input tensor `input` (a plan tensor id), flat element `index`, is the dim `symbol`."""

    input: int
    index: int
    symbol: str


@dataclass(frozen=True)
class ValueCheck:
    """`expr` must lie in [`minimum`, `maximum`] once its names are bound (no `maximum`: unbounded);
    `where` names the node and input, and what the plan assumed."""

    expr: SymbolicDim
    minimum: int
    where: str
    maximum: int | None = None


@dataclass(frozen=True)
class ValueFill:
    """How raw values become the dims their symbols stand for, applied where they are bound.

    `operands` are symbol names, or ints the plan already knows. ``"reshape"``: a Reshape target
    over data of `dims`: an element 0 is `dims[i]` unless `keep_zero`, one -1 is what makes the
    product of all equal the product of `dims`. ``"bounds"``: (start, end) over an axis of size
    `dims[0]` walked with a positive step (no `dims`: a Range, unbounded): a negative bound counts
    from the end, both clamp to [0, size], and an end before the start moves to it (nothing to take).
    `where` names the node and input for errors."""

    kind: str
    operands: tuple[str | int, ...]
    dims: tuple[SymbolicDim, ...] = ()
    keep_zero: bool = False
    where: str = ""


def fill_values(fill: ValueFill, raw: Mapping[str, int], dims: Sequence[int]) -> dict[str, int]:
    """The values `fill`'s symbols stand for, from their `raw` values and `dims` evaluated."""
    values = [raw[o] if isinstance(o, str) else o for o in fill.operands]
    sizes = _reshape(values, dims, fill) if fill.kind == "reshape" else _bounds(values, dims, fill)
    return {o: v for o, v in zip(fill.operands, sizes) if isinstance(o, str)}


def _reshape(raw: list[int], dims: Sequence[int], fill: ValueFill) -> list[int]:
    sizes = list(raw)
    text = f"{fill.where}: the target {raw} (input dims {list(dims)})"
    if not fill.keep_zero:
        for i, v in enumerate(raw):
            if v == 0:
                if i >= len(dims):
                    raise InputError(f"{text} copies dim {i}, which the input does not have")
                sizes[i] = dims[i]
    if sizes.count(-1) > 1 or any(v < -1 for v in sizes):
        raise InputError(f"{text} has more than one -1 or a negative size")
    if -1 in sizes:
        rest = math.prod(v for v in sizes if v != -1)
        total = math.prod(dims)
        if rest == 0 or total % rest:
            raise InputError(f"{text}: no size for the -1 makes {total} elements")
        sizes[sizes.index(-1)] = total // rest
    return sizes


def _bounds(raw: list[int], dims: Sequence[int], fill: ValueFill) -> list[int]:
    start, end = raw
    if dims:
        size = dims[0]
        start, end = (min(max(v + size if v < 0 else v, 0), size) for v in (start, end))
    if end < start:  # an empty range: whichever bound is a symbol moves (a known one cannot)
        end, start = (start, start) if isinstance(fill.operands[1], str) else (end, end)
    return [start, end]


SPECIALIZED_OFFSET = 2**31
"""A value the plan is specialized for (an axis from a graph input) is kept among the compiled dims
as ``value + SPECIALIZED_OFFSET``: dims are non-negative, values may not be (axis -1)."""

UNSPECIALIZED = -1
"""The compiled-dim value of a structural input no plan was made for yet (a deferred plan)."""


def specialized_dim(value: object, dtype: np.dtype) -> int:
    """The compiled dim that stands for one element a plan is specialized for: an integer plus
    `SPECIALIZED_OFFSET`, a float as its bit pattern (dims are non-negative integers)."""
    if dtype.kind == "f":
        bits = np.asarray(value, dtype=dtype).view(np.uint16 if dtype.itemsize == 2 else np.uint32)
        return int(bits)
    dim: int = int(value) + SPECIALIZED_OFFSET  # type: ignore[call-overload]
    if not 0 <= dim < 2 * SPECIALIZED_OFFSET:
        raise InputError(f"value {value} is outside the 32-bit range a plan can be specialized for")
    return dim


def specialized_value(dim: int, dtype: np.dtype) -> object:
    """The element a compiled dim from `specialized_dim` stands for."""
    if dtype.kind == "f":
        return np.asarray(dim, dtype=np.uint16 if dtype.itemsize == 2 else np.uint32).view(dtype).item()
    return dim - SPECIALIZED_OFFSET
