"""A dims change re-evaluates only what depends on the dims that moved.

A decode step moves the past and total lengths by one, which a tenth of its steps read. `IncrementalLayout` keeps, per
set of changed dims, the buffers, steps, constraints and outputs that depend on it, and one
`DimProgram` that evaluates all of their expressions in a single loop (each distinct sub-expression
once) instead of walking `SymbolicExpr` trees per item. A step whose bound buffer changed size is
re-checked too (its range checks read that size); a dispatch the base layout skips (a count of 0)
whose counts read none of the changed dims is not evaluated at all (`_Affected`). Turning one
step's numbers into values is `dim_items.step_values`.

`update` mirrors `layout.evaluate_layout` on the affected items and returns None when its checks
fail (a violated constraint, a range out of bounds, a negative size), or raises what the arithmetic
raises: the executor then takes the full path, whose errors name node and tensor, so this module is
right about values, never about error text. Sizes are kept by buffer slot (a list: hashing `BufferRef` cost more than the
arithmetic), with what each buffer has room for; only a buffer past that goes to `BufferPool.ensure`,
and a reallocation sends the executor down the full path (it rebinds every dispatch). The layout's
size dict is updated through the full layout's own `BufferRef` objects (`_carried`), which a dict
matches by identity without calling the dataclass's `__eq__`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onyxia.core.errors import InputError
from onyxia.core.plan import BufferRef, CompiledModel, CopyBuffer, Dispatch, TensorRole
from onyxia.runtime.convert import to_gpu
from onyxia.runtime.device import DeviceContext
from onyxia.runtime.dim_items import Item, Limits, StepItem, item, step_item, step_values
from onyxia.runtime.dim_program import DimProgram, Gather, gather
from onyxia.runtime.layout import DimsLayout, DispatchValues, FlatStep

__all__ = ["Delta", "IncrementalLayout"]


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
    the program's result: one slot per constraint side and buffer size, a `Gather` for the rest.

    A step comes with whether its workgroup counts read none of the changed dims: then a step the
    base layout skips (a count of 0) stays skipped whatever else moved, and is not evaluated at all.
    A decode step of the 270m plan skips 36 of its 55 affected steps so (prefill-only kernels)."""

    program: DimProgram
    constraints: tuple[tuple[int, int], ...]
    buffers: tuple[tuple[int, int], ...]  # (buffer slot, value slot)
    outputs: tuple[tuple[tuple[int, ...], Gather], ...]  # (output tensor ids of one shape, their dims)
    symbolic: tuple[tuple[int, Gather], ...]  # (SYMBOLIC tensor id, its values)
    steps: tuple[tuple[StepItem, Gather, bool], ...]  # (step, all its `exprs`: at least 3, counts fixed)

    @staticmethod
    def build(
        changed: frozenset[str],
        constraints: tuple[Item, ...],
        buffers: tuple[Item, ...],
        outputs: tuple[Item, ...],
        symbolic: tuple[Item, ...],
        steps: tuple[StepItem, ...],
    ) -> _Affected:
        program = DimProgram()
        return _Affected(
            program,
            tuple((program.add(c.exprs[0]), program.add(c.exprs[1])) for c in constraints),
            tuple((b.key, program.add(b.exprs[0])) for b in buffers),
            _by_shape(program, outputs),
            tuple((t.key, gather(program.add_all(t.exprs))) for t in symbolic),
            tuple((s, gather(program.add_all(s.exprs)), _counts_fixed(s, changed)) for s in steps),
        )


def _by_shape(program: DimProgram, outputs: tuple[Item, ...]) -> tuple[tuple[tuple[int, ...], Gather], ...]:
    """Outputs grouped by their dims' slots: a decoder's 36 present caches share one shape."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for o in outputs:
        groups.setdefault(program.add_all(o.exprs), []).append(o.key)
    return tuple((tuple(tids), gather(slots)) for slots, tids in groups.items())


def _counts_fixed(step: StepItem, changed: frozenset[str]) -> bool:
    """Whether `step` is a dispatch whose workgroup counts do not read the `changed` dims."""
    return isinstance(step.step, Dispatch) and not (item(0, step.exprs[:3]).symbols & changed)


class IncrementalLayout:
    """Dependency index of one plan; `update` turns a committed layout into the layout for new dims."""

    def __init__(self, plan: CompiledModel, flat: list[FlatStep], ctx: DeviceContext) -> None:
        self.plan = plan
        self.limits = Limits(ctx.max_workgroups, ctx.max_binding_size, ctx.offset_alignment)
        sized = [(BufferRef(tensor=t.id), t.nbytes) for t in plan.tensors.values()]
        sized += [(BufferRef(scratch=s.id), s.size) for op in plan.operations for s in op.scratch]
        self._refs = [ref for ref, _ in sized]  # buffers by slot: steps index sizes by int, not by BufferRef
        self._keys = self._refs  # the same refs as the full layout's dict holds them (`_carried`)
        self._slot = slot = {ref: i for i, ref in enumerate(self._refs)}
        self._buffers = [item(i, (nbytes,)) for i, (_, nbytes) in enumerate(sized)]
        self._steps = [
            step_item(i, fs, slot) for i, fs in enumerate(flat) if isinstance(fs.step, (Dispatch, CopyBuffer))
        ]
        self._constraints = [item(i, (a, b)) for i, (a, b, _) in enumerate(plan.constraints)]
        self._outputs = [item(tid, tuple(plan.tensors[tid].dims)) for tid in dict.fromkeys(plan.outputs)]
        self._symbolic = [
            item(t.id, tuple(np.asarray(t.data).flat))
            for t in plan.tensors.values()
            if t.role is TensorRole.SYMBOLIC and t.data is not None
        ]
        self._reads: dict[int, set[int]] = {}  # buffer slot -> flat steps whose checks read its size
        for x in self._steps:
            for i in x.slots:
                self._reads.setdefault(i, set()).add(x.key)
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
        for tids, shape_of in affected.outputs:
            shape: tuple[int, ...] = shape_of(vals)
            if min(shape, default=0) < 0:
                return None
            layout.output_shapes.update(dict.fromkeys(tids, shape))
        for tid, values_of in affected.symbolic:
            ref = BufferRef(tensor=tid)
            layout.symbolic[ref] = self._symbolic_values(tid, values_of(vals))
            delta.symbolic.append(ref)
        steps, limits = base.steps, self.limits
        for x, exprs_of, counts_fixed in affected.steps:
            before = steps[x.key]
            if counts_fixed and type(before) is DispatchValues and before.workgroups is None:
                continue  # skipped before, and its counts did not move: skipped still
            values = step_values(x, exprs_of(vals), sizes, limits)
            if values is None:
                return None
            if values != before:
                layout.steps[x.key] = values
                delta.steps.append(x.key)
        self._last = delta
        return delta

    def allocated(self, delta: Delta, capacity: Callable[[BufferRef], int]) -> None:
        """Raise the grown buffers' peaks to their allocation (`capacity`; the pool grows 1.5x), so the
        next steps skip `BufferPool.ensure` until they outgrow it (a decode step's masks grow every step)."""
        for ref in delta.grown:
            delta.peaks[self._slot[ref]] = max(delta.peaks[self._slot[ref]], capacity(ref))

    def _carried(self, base: DimsLayout) -> tuple[list[int], list[int]]:
        """(sizes, peaks) by slot for `base`: carried over from the delta that produced it, else read
        from a full layout, whose sizes the full path has just allocated (and whose own `BufferRef`
        objects then key the sizes: a dict finds a key by identity before it compares by value)."""
        last = self._last
        if last is not None and last.layout is base:
            return list(last.sizes), list(last.peaks)
        canonical = {ref: ref for ref in base.buffer_bytes}
        self._keys = [canonical.get(ref, ref) for ref in self._refs]
        sizes = [base.buffer_bytes[ref] for ref in self._keys]
        return sizes, list(sizes)

    def _resize(self, buffers: tuple[tuple[int, int], ...], vals: list[Any], delta: Delta) -> bool:
        """Move the sizes of `buffers` (slot, value slot) to `vals`; False for a negative size. A size
        that did not move was valid before, so only moved ones are checked."""
        sizes, peaks, keys = delta.sizes, delta.peaks, self._keys
        moved: list[int] = []
        for slot, value in buffers:
            nbytes: int = vals[value]
            if nbytes != sizes[slot]:
                if nbytes < 0:
                    return False
                sizes[slot] = nbytes
                moved.append(slot)
                if nbytes > peaks[slot]:
                    peaks[slot] = nbytes
                    delta.grown.append(keys[slot])
        delta.buffers = [keys[slot] for slot in moved]
        delta.layout.buffer_bytes.update(zip(delta.buffers, [sizes[slot] for slot in moved]))
        return True

    def _affected(self, changed: frozenset[str]) -> _Affected:
        if changed not in self._cache:

            def pick(items: list[Item]) -> tuple[Item, ...]:
                return tuple(x for x in items if x.symbols & changed)

            buffers = pick(self._buffers)
            reread: set[int] = set().union(*(self._reads.get(b.key, set()) for b in buffers))
            steps = tuple(s for s in self._steps if s.symbols & changed or s.key in reread)
            groups = (pick(self._constraints), buffers, pick(self._outputs), pick(self._symbolic))
            self._cache[changed] = _Affected.build(changed, *groups, steps)
        return self._cache[changed]

    def _symbolic_values(self, tid: int, raw: tuple[int, ...]) -> np.ndarray:
        t = self.plan.tensors[tid]
        shape = np.asarray(t.data).shape
        logical = np.array(raw, dtype=np.int64).reshape(shape).astype(t.dtype.numpy)
        return to_gpu(f"SYMBOLIC tensor '{t.name}'", t.dtype, logical, InputError)
