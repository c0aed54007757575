"""A dims change re-evaluates only what depends on the dims that moved.

A decode step moves the past and total lengths by one, which a tenth of its steps read. `IncrementalLayout` keeps, per
set of changed dims, the buffers, steps, constraints and outputs that depend on it, and one
`DimProgram` that evaluates all of their expressions in a single loop (each distinct sub-expression
once) instead of walking `SymbolicExpr` trees per item. A step whose bound buffer changed size is
re-checked too (its range checks read that size).

`update` mirrors `layout.evaluate_layout` on the affected items and returns None when its checks
fail (a violated constraint, a range out of bounds, a negative size), or raises what the arithmetic
raises: the executor then takes the full path, whose errors name node and tensor, so this module is
right about values, never about error text. Sizes are kept by buffer slot (a list: hashing `BufferRef` cost more than the
arithmetic), with what each buffer has room for; only a buffer past that goes to `BufferPool.ensure`,
and a reallocation sends the executor down the full path (it rebinds every dispatch).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onyxia.core.errors import InputError
from onyxia.core.plan import BufferRef, CompiledModel, CopyBuffer, Dispatch, TensorRole
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.runtime.convert import padded_nbytes, to_gpu
from onyxia.runtime.device import DeviceContext
from onyxia.runtime.dim_program import DimProgram, Gather, gather
from onyxia.runtime.layout import CopyValues, DimsLayout, DispatchValues, FlatStep, StepValues, split_workgroups

__all__ = ["Delta", "IncrementalLayout"]

Dims = tuple[SymbolicDim | None, ...]


def _names(dims: Iterable[SymbolicDim | None]) -> frozenset[str]:
    return frozenset().union(*(d.names() for d in dims if isinstance(d, SymbolicExpr)))


@dataclass(frozen=True)
class _Item:
    key: int  # flat step index, buffer slot, output tensor id or constraint index
    symbols: frozenset[str]
    exprs: Dims  # the dims whose values this item needs


@dataclass(frozen=True)
class _StepItem(_Item):
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


@dataclass
class Delta:
    """`layout` for the new dims and what moved: buffer sizes (`grown`: past their room), SYMBOLIC tensors, steps."""

    layout: DimsLayout
    buffers: list[BufferRef] = field(default_factory=list)
    grown: list[BufferRef] = field(default_factory=list)
    symbolic: list[BufferRef] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # logical bytes by buffer slot
    peaks: list[int] = field(default_factory=list)  # bytes each slot has room for (`allocated`)


@dataclass(frozen=True)
class _Affected:
    """What one set of changed dims touches, and one `DimProgram` for all of their numbers: a decode
    step runs it once instead of evaluating per item, which also keeps the code it runs together
    (after a long GPU wait the host caches are cold). Each item comes with where its values sit in
    the program's result: one slot per constraint side and buffer size, a `Gather` for the rest."""

    program: DimProgram
    constraints: tuple[tuple[int, int], ...]
    buffers: tuple[tuple[int, int], ...]  # (buffer slot, value slot)
    outputs: tuple[tuple[int, Gather], ...]  # (output tensor id, its dims)
    symbolic: tuple[tuple[int, Gather], ...]  # (SYMBOLIC tensor id, its values)
    steps: tuple[tuple[_StepItem, Gather], ...]  # (step, all its `exprs`: at least 3)

    @staticmethod
    def build(
        constraints: tuple[_Item, ...],
        buffers: tuple[_Item, ...],
        outputs: tuple[_Item, ...],
        symbolic: tuple[_Item, ...],
        steps: tuple[_StepItem, ...],
    ) -> _Affected:
        program = DimProgram()
        return _Affected(
            program,
            tuple((program.add(c.exprs[0]), program.add(c.exprs[1])) for c in constraints),
            tuple((b.key, program.add(b.exprs[0])) for b in buffers),
            tuple((o.key, gather(program.add_all(o.exprs))) for o in outputs),
            tuple((t.key, gather(program.add_all(t.exprs))) for t in symbolic),
            tuple((s, gather(program.add_all(s.exprs))) for s in steps),
        )


class IncrementalLayout:
    """Dependency index of one plan; `update` turns a committed layout into the layout for new dims."""

    def __init__(self, plan: CompiledModel, flat: list[FlatStep], ctx: DeviceContext) -> None:
        self.plan, self.ctx = plan, ctx
        sized = [(BufferRef(tensor=t.id), t.nbytes) for t in plan.tensors.values()]
        sized += [(BufferRef(scratch=s.id), s.size) for op in plan.operations for s in op.scratch]
        self._refs = [ref for ref, _ in sized]  # buffers by slot: steps index sizes by int, not by BufferRef
        self._slot = slot = {ref: i for i, ref in enumerate(self._refs)}
        self._buffers = [_item(i, (nbytes,)) for i, (_, nbytes) in enumerate(sized)]
        self._steps = [
            _step_item(i, fs, slot) for i, fs in enumerate(flat) if isinstance(fs.step, (Dispatch, CopyBuffer))
        ]
        self._constraints = [_item(i, (a, b)) for i, (a, b, _) in enumerate(plan.constraints)]
        self._outputs = [_item(tid, tuple(plan.tensors[tid].dims)) for tid in dict.fromkeys(plan.outputs)]
        self._symbolic = [
            _item(t.id, tuple(np.asarray(t.data).flat))
            for t in plan.tensors.values()
            if t.role is TensorRole.SYMBOLIC and t.data is not None
        ]
        self._reads: dict[int, set[int]] = {}  # buffer slot -> flat steps whose checks read its size
        for item in self._steps:
            for i in item.slots:
                self._reads.setdefault(i, set()).add(item.key)
        self._cache: dict[frozenset[str], _Affected] = {}
        self._last: Delta | None = None  # the latest delta: its sizes carry over once it is committed

    def update(self, base: DimsLayout, dims: Mapping[str, int]) -> Delta | None:
        """What `dims` change relative to `base` (the committed layout), or None where the full path
        must run instead."""
        changed = frozenset(k for k in dims.keys() | base.dims.keys() if dims.get(k) != base.dims.get(k))
        affected = self._affected(changed)
        vals = affected.program(dims)
        for a, b in affected.constraints:
            if vals[a] != vals[b] or vals[a] < 0:
                return None
        layout = DimsLayout(dict(dims), dict(base.buffer_bytes), list(base.steps), dict(base.symbolic), {})
        sizes, peaks = self._carried(base)
        delta = Delta(layout, sizes=sizes, peaks=peaks)
        if not self._resize(affected.buffers, vals, delta):
            return None
        layout.output_shapes = dict(base.output_shapes)
        for tid, shape_of in affected.outputs:
            shape: tuple[int, ...] = shape_of(vals)
            if min(shape, default=0) < 0:
                return None
            layout.output_shapes[tid] = shape
        for tid, values_of in affected.symbolic:
            ref = BufferRef(tensor=tid)
            layout.symbolic[ref] = self._symbolic_values(tid, values_of(vals))
            delta.symbolic.append(ref)
        for item, exprs_of in affected.steps:
            values = self._step_values(item, exprs_of(vals), delta.sizes)
            if values is None:
                return None
            if values != base.steps[item.key]:
                layout.steps[item.key] = values
                delta.steps.append(item.key)
        self._last = delta
        return delta

    def allocated(self, delta: Delta, capacity: Callable[[BufferRef], int]) -> None:
        """Raise the grown buffers' peaks to their allocation (`capacity`; the pool grows 1.5x), so the
        next steps skip `BufferPool.ensure` until they outgrow it (a decode step's masks grow every step)."""
        for ref in delta.grown:
            delta.peaks[self._slot[ref]] = max(delta.peaks[self._slot[ref]], capacity(ref))

    def _carried(self, base: DimsLayout) -> tuple[list[int], list[int]]:
        """(sizes, peaks) by slot for `base`: carried over from the delta that produced it, else read
        from a full layout, whose sizes the full path has just allocated."""
        last = self._last
        if last is not None and last.layout is base:
            return list(last.sizes), list(last.peaks)
        sizes = [base.buffer_bytes[ref] for ref in self._refs]
        return sizes, list(sizes)

    def _resize(self, buffers: tuple[tuple[int, int], ...], vals: list[Any], delta: Delta) -> bool:
        sizes, peaks = delta.sizes, delta.peaks
        for slot, value in buffers:
            nbytes: int = vals[value]
            if nbytes < 0:
                return False
            if nbytes != sizes[slot]:
                ref = self._refs[slot]
                sizes[slot] = delta.layout.buffer_bytes[ref] = nbytes
                delta.buffers.append(ref)
                if nbytes > peaks[slot]:
                    peaks[slot] = nbytes
                    delta.grown.append(ref)
        return True

    def _affected(self, changed: frozenset[str]) -> _Affected:
        if changed not in self._cache:

            def pick(items: list[_Item]) -> tuple[_Item, ...]:
                return tuple(x for x in items if x.symbols & changed)

            buffers = pick(self._buffers)
            reread: set[int] = set().union(*(self._reads.get(b.key, set()) for b in buffers))
            steps = tuple(s for s in self._steps if s.symbols & changed or s.key in reread)
            groups = (pick(self._constraints), buffers, pick(self._outputs), pick(self._symbolic))
            self._cache[changed] = _Affected.build(*groups, steps)
        return self._cache[changed]

    def _symbolic_values(self, tid: int, raw: tuple[int, ...]) -> np.ndarray:
        t = self.plan.tensors[tid]
        shape = np.asarray(t.data).shape
        logical = np.array(raw, dtype=np.int64).reshape(shape).astype(t.dtype.numpy)
        return to_gpu(f"SYMBOLIC tensor '{t.name}'", t.dtype, logical, InputError)

    def _step_values(self, item: _StepItem, raw: tuple[Any, ...], sizes: list[int]) -> StepValues:
        if isinstance(item.step, CopyBuffer):
            return _copy_values(item.slots, raw, sizes)
        counts: tuple[int, int, int] = raw[:3]
        limit = self.ctx.max_workgroups
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
        start, end = item.offsets
        checked = self._ranges(item.slots, raw[start:end], raw[end:], sizes)
        if checked is None:
            return None
        return DispatchValues(counts, item.pack(*block), checked)

    def _ranges(
        self, slots: tuple[int, ...], offsets: tuple[int, ...], ranges: tuple[int | None, ...], sizes: list[int]
    ) -> tuple[tuple[int, int | None], ...] | None:
        """`layout`'s binding checks; padded_nbytes is inlined on this hot path."""
        limit, alignment = self.ctx.max_binding_size, self.ctx.offset_alignment
        out: list[tuple[int, int | None]] = []
        for slot, offset, size in zip(slots, offsets, ranges):
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
            out.append((offset, size))
        return tuple(out)


def _copy_values(slots: tuple[int, ...], raw: tuple[int, ...], sizes: list[int]) -> CopyValues | None:
    size, src_offset, dst_offset = raw
    if min(raw) < 0 or size % 4 or src_offset % 4 or dst_offset % 4:
        return None
    for slot, offset in zip(slots, (src_offset, dst_offset)):
        if size and offset + size > padded_nbytes(sizes[slot]):
            return None
    return CopyValues(size, src_offset, dst_offset)


def _item(key: int, exprs: Dims) -> _Item:
    return _Item(key, _names(exprs), exprs)


def _step_item(index: int, fs: FlatStep, slot: Mapping[BufferRef, int]) -> _StepItem:
    step = fs.step
    if isinstance(step, CopyBuffer):
        exprs: Dims = (step.size, step.src_offset, step.dst_offset)
        return _StepItem(index, _names(exprs), exprs, step, (slot[step.src], slot[step.dst]))
    assert isinstance(step, Dispatch)
    fields = tuple(f.value for f in fs.fields)
    offsets, ranges = tuple(b.offset for b in step.bindings), tuple(b.size for b in step.bindings)
    exprs = (*step.workgroups, *fields, *offsets, *ranges)
    words = fs.immediate_size // 4
    return _StepItem(
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
    )
