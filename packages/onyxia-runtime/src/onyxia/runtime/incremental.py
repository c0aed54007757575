"""A dims change re-evaluates only what depends on the dims that moved.

An LLM decode step moves ``past_sequence_length`` and ``total_sequence_length`` by one; about a
tenth of a decoder's steps (attention, the cache append) read them. `IncrementalLayout` keeps, per
set of changed dims, the buffers, steps, constraints and outputs that depend on it, and evaluates
their expressions through Python compiled once per item (``lambda d: ((d['n'] + 63) // 64, 1, 1)``)
instead of walking `SymbolicExpr` trees. A step is also re-checked when a buffer it binds changed
size, since its range checks read that size.

`update` mirrors `layout.evaluate_layout` on the affected items and returns None whenever its own
checks fail (a violated constraint, a range out of bounds, a negative size), or raises what the
compiled code raises (a zero division): the executor then takes the full path, which raises with
the message that names node and tensor, so this module only has to be right about values, never
about error text. Sizes are kept by buffer slot (a list, not a `BufferRef` dict: hashing the
frozen dataclass cost more than the arithmetic), with the largest size each buffer has been
committed at; only a buffer above that can need to grow, so only those go to `BufferPool.ensure`,
and a reallocation sends the executor down the full path too (it rebinds every dispatch).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np

from onyxia.core.errors import InputError
from onyxia.core.plan import BufferRef, CompiledModel, CopyBuffer, Dispatch, TensorRole
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.runtime.convert import padded_nbytes, to_gpu
from onyxia.runtime.device import DeviceContext
from onyxia.runtime.layout import CopyValues, DimsLayout, DispatchValues, FlatStep, StepValues, split_workgroups

__all__ = ["Delta", "IncrementalLayout", "compile_dims"]

Compiled = Callable[[Mapping[str, int]], tuple]
_OPS = {"+": "+", "-": "-", "*": "*", "/": "//", "%": "%"}  # SymbolicExpr's / and % are Python's // and %


def _source(dim: SymbolicDim | None) -> str:
    if dim is None:
        return "None"
    if isinstance(dim, Integral):
        return repr(int(dim))
    assert isinstance(dim, SymbolicExpr)
    if dim.is_name:
        return f"d[{str(dim.args[0])!r}]"  # repr: a dim name can never break out of the string literal
    a, b = (_source(x) for x in dim.args)  # type: ignore[arg-type]  # args of a non-name are dims
    return f"({a} {_OPS[dim.op]} {b})"


def compile_dims(items: Sequence[object]) -> Compiled:
    """A function of the dims mapping returning `items` (dims, None, or nested tuples/lists of them) as
    tuples of ints; equal to `evaluate_dim` on each whenever every name is bound (a zero division
    raises ZeroDivisionError, a missing name KeyError)."""

    def nested(x: object) -> str:
        if isinstance(x, (tuple, list)):
            return "(" + "".join(f"{nested(v)}, " for v in x) + ")"
        return _source(x)  # type: ignore[arg-type]

    return eval(f"lambda d: {nested(items)}", {"__builtins__": {}})


def _names(items: object) -> frozenset[str]:
    if isinstance(items, (tuple, list)):
        return frozenset().union(*(_names(x) for x in items))
    return frozenset(items.names()) if isinstance(items, SymbolicExpr) else frozenset()


@dataclass(frozen=True)
class _Item:
    key: object  # flat step index, buffer slot, output tensor id or constraint index
    symbols: frozenset[str]
    exprs: tuple  # type: ignore[type-arg]  # what `compile_dims` turns into this item's numbers


@dataclass(frozen=True)
class _StepItem(_Item):
    """A step, with what turning its numbers into values needs, looked up once."""

    step: Dispatch | CopyBuffer
    slots: tuple[int, ...]  # buffer slot per binding (a copy: source, destination)
    where: str = ""
    words: tuple[int, ...] = ()  # immediates block index of each field
    pack: Callable[..., bytes] = bytes
    blank: tuple[int, ...] = ()  # the immediates block with every word 0


@dataclass
class Delta:
    """`layout` for the new dims, and what moved: buffer sizes (`grown`: those above any size this
    layout's history committed, which `BufferPool.ensure` must see), SYMBOLIC tensors, step values."""

    layout: DimsLayout
    buffers: list[BufferRef] = field(default_factory=list)
    grown: list[BufferRef] = field(default_factory=list)
    symbolic: list[BufferRef] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # logical bytes by buffer slot
    peaks: list[int] = field(default_factory=list)  # largest committed bytes by slot: allocated at least


@dataclass(frozen=True)
class _Affected:
    """What one set of changed dims touches, and one compiled function for all of their numbers: a
    decode step calls it once instead of a function per item, which also keeps the code it runs
    together (after a long GPU wait the host caches are cold)."""

    constraints: tuple[_Item, ...]
    buffers: tuple[_Item, ...]
    outputs: tuple[_Item, ...]
    symbolic: tuple[_Item, ...]
    steps: tuple[_StepItem, ...]
    fn: Compiled


class IncrementalLayout:
    """Dependency index of one plan; `update` turns a committed layout into the layout for new dims."""

    def __init__(self, plan: CompiledModel, flat: list[FlatStep], ctx: DeviceContext) -> None:
        self.plan, self.ctx = plan, ctx
        sized = [(BufferRef(tensor=t.id), t.nbytes) for t in plan.tensors.values()]
        sized += [(BufferRef(scratch=s.id), s.size) for op in plan.operations for s in op.scratch]
        self._refs = [ref for ref, _ in sized]  # buffers by slot: steps index sizes by int, not by BufferRef
        slot = {ref: i for i, ref in enumerate(self._refs)}
        self._buffers = [_item(i, nbytes) for i, (_, nbytes) in enumerate(sized)]
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
                self._reads.setdefault(i, set()).add(item.key)  # type: ignore[arg-type]
        self._cache: dict[frozenset[str], _Affected] = {}
        self._last: Delta | None = None  # the latest delta: its sizes carry over once it is committed

    def update(self, base: DimsLayout, dims: Mapping[str, int]) -> Delta | None:
        """What `dims` change relative to `base` (the committed layout), or None where the full path
        must run instead."""
        changed = frozenset(k for k in dims.keys() | base.dims.keys() if dims.get(k) != base.dims.get(k))
        affected = self._affected(changed)
        constraints, buffers, outputs, symbolic, steps = affected.fn(dims)
        if any(a != b or a < 0 for a, b in constraints):
            return None
        layout = DimsLayout(dict(dims), dict(base.buffer_bytes), list(base.steps), dict(base.symbolic), {})
        sizes, peaks = self._carried(base)
        delta = Delta(layout, sizes=sizes, peaks=peaks)
        if not self._resize(affected.buffers, buffers, delta):
            return None
        layout.output_shapes = dict(base.output_shapes)
        for item, shape in zip(affected.outputs, outputs):
            if min(shape, default=0) < 0:
                return None
            layout.output_shapes[item.key] = shape  # type: ignore[index]
        for item, raw in zip(affected.symbolic, symbolic):
            ref = BufferRef(tensor=item.key)  # type: ignore[arg-type]
            layout.symbolic[ref] = self._symbolic_values(item, raw)
            delta.symbolic.append(ref)
        for item, raw in zip(affected.steps, steps):
            values = self._step_values(item, raw, delta.sizes)
            if values is None:
                return None
            index: int = item.key  # type: ignore[assignment]
            if values != base.steps[index]:
                layout.steps[index] = values
                delta.steps.append(index)
        self._last = delta
        return delta

    def _carried(self, base: DimsLayout) -> tuple[list[int], list[int]]:
        """(sizes, peaks) by slot for `base`: carried over from the delta that produced it, else read
        from a full layout, whose sizes the full path has just allocated."""
        last = self._last
        if last is not None and last.layout is base:
            return list(last.sizes), list(last.peaks)
        sizes = [base.buffer_bytes[ref] for ref in self._refs]
        return sizes, list(sizes)

    def _resize(self, buffers: tuple[_Item, ...], values: tuple, delta: Delta) -> bool:  # type: ignore[type-arg]
        sizes, peaks = delta.sizes, delta.peaks
        for item, (nbytes,) in zip(buffers, values):
            slot: int = item.key  # type: ignore[assignment]
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
            pick = lambda items: tuple(x for x in items if x.symbols & changed)
            buffers = pick(self._buffers)
            reread = set().union(*(self._reads.get(b.key, ()) for b in buffers))  # type: ignore[call-overload]
            steps = tuple(s for s in self._steps if s.symbols & changed or s.key in reread)
            groups = (pick(self._constraints), buffers, pick(self._outputs), pick(self._symbolic))
            fn = compile_dims([[x.exprs for x in group] for group in (*groups, steps)])
            self._cache[changed] = _Affected(*groups, steps, fn)
        return self._cache[changed]

    def _symbolic_values(self, item: _Item, raw: tuple) -> np.ndarray:  # type: ignore[type-arg]
        t = self.plan.tensors[item.key]  # type: ignore[index]
        shape = np.asarray(t.data).shape
        logical = np.array(raw, dtype=np.int64).reshape(shape).astype(t.dtype.numpy)
        return to_gpu(f"SYMBOLIC tensor '{t.name}'", t.dtype, logical, InputError)

    def _step_values(self, item: _StepItem, raw: tuple, sizes: list[int]) -> StepValues:
        if isinstance(item.step, CopyBuffer):
            return _copy_values(item.slots, raw, sizes)
        counts, fields, ranges = raw
        limit = self.ctx.max_workgroups
        if min(counts) <= 0 or max(counts) > limit:  # the common case, (x, y, z) as issued, skips the call
            if min(counts) < 0:
                return None
            counts = split_workgroups(counts, limit, item.where)
            if counts is None:
                return DispatchValues(None, b"", ())
        block = list(item.blank)
        for word, value in zip(item.words, fields):
            if not 0 <= value <= 0xFFFFFFFF:
                return None
            block[word] = value
        checked = self._ranges(item.slots, ranges, sizes)
        if checked is None:
            return None
        return DispatchValues(counts, item.pack(*block), checked)

    def _ranges(self, slots: tuple[int, ...], ranges: tuple, sizes: list[int]) -> tuple | None:
        """`layout`'s binding checks; padded_nbytes is inlined on this hot path."""
        limit, alignment = self.ctx.max_binding_size, self.ctx.offset_alignment
        out = []
        for slot, (offset, size) in zip(slots, ranges):
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


def _copy_values(slots: tuple[int, ...], raw: tuple, sizes: list[int]) -> CopyValues | None:
    size, src_offset, dst_offset = raw
    if min(raw) < 0 or size % 4 or src_offset % 4 or dst_offset % 4:
        return None
    for slot, offset in zip(slots, (src_offset, dst_offset)):
        if size and offset + size > padded_nbytes(sizes[slot]):
            return None
    return CopyValues(size, src_offset, dst_offset)


def _item(key: object, exprs: object) -> _Item:
    if not isinstance(exprs, tuple):
        exprs = (exprs,)
    return _Item(key, _names(exprs), exprs)


def _step_item(index: int, fs: FlatStep, slot: Mapping[BufferRef, int]) -> _StepItem:
    step = fs.step
    if isinstance(step, CopyBuffer):
        exprs: tuple = (step.size, step.src_offset, step.dst_offset)
        return _StepItem(index, _names(exprs), exprs, step, (slot[step.src], slot[step.dst]))
    assert isinstance(step, Dispatch)
    ranges = tuple((b.offset, b.size) for b in step.bindings)
    exprs = (tuple(step.workgroups), tuple(f.value for f in fs.fields), ranges)
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
    )
