"""What `IncrementalLayout` re-evaluates, one item at a time: the dims an item needs, and turning
a step's evaluated numbers into its `StepValues` with `layout.evaluate_layout`'s checks.

Split from `incremental.py`, which decides *which* items a dims change touches; these functions
mirror the full layout's per-step rules (and return None where it would raise: the full path then
reports the error naming node and tensor).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onyxia.core.plan import BufferRef, CopyBuffer, Dispatch
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.runtime.convert import padded_nbytes
from onyxia.runtime.layout import CopyValues, DispatchValues, FlatStep, StepValues, split_workgroups

__all__ = ["Dims", "Item", "Limits", "StepItem", "item", "step_item", "step_values"]

Dims = tuple[SymbolicDim | None, ...]
Sizes = Sequence[int]  # logical bytes by buffer slot


def _names(dims: Iterable[SymbolicDim | None]) -> frozenset[str]:
    return frozenset().union(*(d.names() for d in dims if isinstance(d, SymbolicExpr)))


@dataclass(frozen=True)
class Item:
    key: int  # flat step index, buffer slot, output tensor id or constraint index
    symbols: frozenset[str]
    exprs: Dims  # the dims whose values this item needs


@dataclass(frozen=True)
class StepItem(Item):
    """A step, with what turning its numbers into values needs, looked up once. `exprs` is a copy's
    (size, source offset, destination offset), or a dispatch's 3 workgroup counts, fields, binding
    offsets and binding sizes, one flat tuple (`offsets` is where the last two start)."""

    step: Dispatch | CopyBuffer
    slots: tuple[int, ...]  # buffer slot per binding (a copy: source, destination)
    where: str = ""
    words: tuple[int, ...] = ()  # immediates block index of each field
    pack: Callable[..., bytes] = bytes
    blank: tuple[int, ...] = ()  # the immediates block with every word 0
    offsets: tuple[int, int] = (0, 0)
    # bindings of a whole buffer from offset 0 (no dims in offset or size: their range is always
    # (0, None) and only their buffer's size is checked), and the others (checked in full)
    whole: tuple[int, ...] = ()  # their buffer slots
    ranged: tuple[int, ...] = ()  # their binding indices
    template: tuple[tuple[int, int | None], ...] = ()  # the ranges with every whole binding's (0, None)


def item(key: int, exprs: Dims) -> Item:
    return Item(key, _names(exprs), exprs)


def step_item(index: int, fs: FlatStep, slot: Mapping[BufferRef, int]) -> StepItem:
    step = fs.step
    if isinstance(step, CopyBuffer):
        exprs: Dims = (step.size, step.src_offset, step.dst_offset)
        return StepItem(index, _names(exprs), exprs, step, (slot[step.src], slot[step.dst]))
    assert isinstance(step, Dispatch)
    fields = tuple(f.value for f in fs.fields)
    offsets, ranges = tuple(b.offset for b in step.bindings), tuple(b.size for b in step.bindings)
    exprs = (*step.workgroups, *fields, *offsets, *ranges)
    words = fs.immediate_size // 4
    whole = [i for i, b in enumerate(step.bindings) if isinstance(b.offset, int) and b.offset == 0 and b.size is None]
    ranged = tuple(i for i in range(len(step.bindings)) if i not in whole)
    return StepItem(
        index,
        _names(exprs),
        exprs,
        step,
        tuple(slot[b.buffer] for b in step.bindings),
        f"node '{fs.node}'",
        tuple(f.offset // 4 for f in fs.fields),
        struct.Struct(f"={words}I").pack,  # native order, as `layout` packs through numpy
        (0,) * words,
        (3 + len(fields), 3 + len(fields) + len(offsets)),
        tuple(slot[step.bindings[i].buffer] for i in whole),
        ranged,
        tuple((0, None) if i in whole else (-1, None) for i in range(len(step.bindings))),
    )


@dataclass(frozen=True)
class Limits:
    """The device limits the checks read (`DeviceContext`'s)."""

    max_workgroups: int
    max_binding_size: int
    offset_alignment: int


def step_values(item: StepItem, raw: tuple[Any, ...], sizes: Sizes, limits: Limits) -> StepValues:
    """`item`'s values from its evaluated `exprs`, or None where a check fails."""
    if isinstance(item.step, CopyBuffer):
        return _copy_values(item.slots, raw, sizes)
    counts: tuple[int, int, int] = raw[:3]
    limit = limits.max_workgroups
    if min(counts) <= 0 or max(counts) > limit:  # the common case, (x, y, z) as issued, skips the call
        if min(counts) < 0:
            return None
        issued = split_workgroups(counts, limit, item.where)
        if issued is None:
            return DispatchValues(None, b"", ())
        counts = issued
    block = list(item.blank)
    for word, value in zip(item.words, raw[3:]):
        if not 0 <= value <= 0xFFFFFFFF:
            return None
        block[word] = value
    checked = _ranges(item, raw, sizes, limits)
    if checked is None:
        return None
    return DispatchValues(counts, item.pack(*block), checked)


def _ranges(
    item: StepItem, raw: tuple[Any, ...], sizes: Sizes, limits: Limits
) -> tuple[tuple[int, int | None], ...] | None:
    """`layout`'s binding checks; padded_nbytes is inlined on this hot path. A whole-buffer binding
    needs only its buffer within the binding limit (a decode step's attention binds six so)."""
    limit, alignment = limits.max_binding_size, limits.offset_alignment
    for slot in item.whole:
        if (sizes[slot] + 3) // 4 * 4 > limit:
            return None
    if not item.ranged:
        return item.template
    start, end = item.offsets
    count = end - start
    out = list(item.template)
    for i in item.ranged:
        slot, offset, size = item.slots[i], raw[start + i], raw[start + count + i]
        available = max(4, (sizes[slot] + 3) // 4 * 4)
        if offset < 0 or offset % alignment:
            return None
        if size is None:
            if offset > available or (offset == 0 and available > limit):
                return None
        else:
            size = max(4, (size + 3) // 4 * 4) if size >= 0 else limit + 1
            if size > limit or offset + size > available:
                return None
        out[i] = (offset, size)
    return tuple(out)


def _copy_values(slots: tuple[int, ...], raw: tuple[int, ...], sizes: Sizes) -> CopyValues | None:
    size, src_offset, dst_offset = raw
    if min(raw) < 0 or size % 4 or src_offset % 4 or dst_offset % 4:
        return None
    for slot, offset in zip(slots, (src_offset, dst_offset)):
        if size and offset + size > padded_nbytes(sizes[slot]):
            return None
    return CopyValues(size, src_offset, dst_offset)
