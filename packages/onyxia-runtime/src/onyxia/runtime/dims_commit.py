"""Committing a dims change to `PlanExecutor`'s GPU state: buffers, bind groups, program, copies.

Kept apart from the executor, which decides *when* dims move (load, `update_dimensions()`, input
shapes, plan switches); this module only makes the state match new dims. It prefers the
incremental path (`IncrementalLayout`: only what the moved dims touch is re-evaluated, rebound and
patched in the program) and falls back to a full re-layout when a buffer must grow or the
incremental update declines. Every commit first clears `_layout`, so one that fails half way
leaves the executor asking for a full commit rather than running a stale program. Callers hold
the executor's lock (`@serialized`); nothing here takes it.
"""

from __future__ import annotations

import logging
from typing import Protocol

import numpy as np
import wgpu

from onyxia.core.errors import OnyxiaError
from onyxia.core.plan import BufferRef, CompiledModel, WriteBuffer
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.carries import Carries
from onyxia.runtime.commands import Program
from onyxia.runtime.convert import storage_bytes
from onyxia.runtime.device import DeviceContext, ExecutorStats
from onyxia.runtime.incremental import Delta, IncrementalLayout
from onyxia.runtime.layout import DimsLayout, DispatchValues, FlatStep, evaluate_layout
from onyxia.runtime.program import DispatchState, build_program, commit_dispatch, patch_program, rebinds
from onyxia.runtime.readback import OutputReadback

__all__ = ["CommitTarget", "apply_dims"]

log = logging.getLogger(__name__)


class CommitTarget(Protocol):
    """The state of `PlanExecutor` a dims commit reads and replaces (set up by its `_load`)."""

    ctx: DeviceContext
    stats: ExecutorStats
    compiled: CompiledModel
    _flat: list[FlatStep]
    _names: dict[BufferRef, str]
    _states: list[DispatchState | None]
    _pool: BufferPool
    _carries: Carries
    _readback: OutputReadback
    _incremental: IncrementalLayout
    _program: Program
    _writes: list[tuple[wgpu.GPUBuffer, int, np.ndarray]]
    _layout: DimsLayout | None
    _dims: dict[str, int]


def apply_dims(ex: CommitTarget, dims: dict[str, int]) -> None:
    """Commit `dims`: incrementally from the current layout where it can, else in full. Where the
    incremental update declines or raises, the full path must raise too (naming node and tensor);
    if it accepts the dims, the two disagree: counted in `stats.layout_fallbacks`, logged once."""
    declined = ""
    if ex._layout is not None:
        try:
            delta = ex._incremental.update(ex._layout, dims)
        except (OnyxiaError, ArithmeticError) as e:
            delta, declined = None, f"raised {type(e).__name__} ({e}) on"
        if delta is not None and _commit_delta(ex, delta, ex._layout):
            ex._dims = dims
            ex.stats.dimension_updates += 1
            return
        declined = declined or ("" if delta is not None else "declined")  # a Delta here: a buffer grew
    _apply_full(ex, dims)
    if declined:
        ex.stats.layout_fallbacks += 1
        if ex.stats.layout_fallbacks == 1:
            log.warning("incremental layout %s dims %s, which the full re-layout accepted", declined, dims)


def _commit_delta(ex: CommitTarget, delta: Delta, before: DimsLayout) -> bool:
    """Commit what `delta` moved from `before`; False when a buffer had to grow, since reallocation
    rebinds every dispatch bound to it: the full path does that."""
    layout, pool = delta.layout, ex._pool
    ex._layout = None  # a commit that fails half way must not leave a stale program in use
    if any(pool.ensure(ref, layout.buffer_bytes[ref]) for ref in delta.grown):
        return False
    ex._incremental.allocated(delta, lambda ref: pool.get(ref).size)
    for ref in delta.symbolic:
        pool.write(ref, layout.symbolic[ref])
    rebuild = False
    for index in delta.steps:
        state, values = ex._states[index], layout.steps[index]
        if state is not None and isinstance(values, DispatchValues) and rebinds(state, values, before.steps[index]):
            commit_dispatch(state, values, pool, ex.ctx, ex.stats)
        rebuild |= not patch_program(ex._program, index, ex._flat[index], state, values, pool)
    if rebuild:
        ex._program = build_program(ex._flat, ex._states, layout, pool)
    if delta.buffers:
        ex._carries.plan(layout)
    ex._readback.plan(layout)
    ex._layout = layout
    return True


def _apply_full(ex: CommitTarget, dims: dict[str, int]) -> None:
    """Evaluate every dims-dependent number under `dims` and commit all of it (the first commit,
    and whenever a buffer grows or the incremental path declines)."""
    layout = evaluate_layout(ex.compiled, ex._flat, dims, ex.ctx, ex._names)
    ex._layout = None  # a commit that fails half way must not leave a stale program in use
    ex._pool.ensure_all(layout.buffer_bytes)
    for ref, array in layout.symbolic.items():
        ex._pool.write(ref, array)
    for state, values in zip(ex._states, layout.steps):
        if state is not None and isinstance(values, DispatchValues):
            commit_dispatch(state, values, ex._pool, ex.ctx, ex.stats)
    ex._program = build_program(ex._flat, ex._states, layout, ex._pool)
    ex._carries.plan(layout)
    ex._writes = [
        (ex._pool.get(fs.step.dst), fs.step.offset, storage_bytes(np.frombuffer(fs.step.data, np.uint8)))
        for fs in ex._flat
        if isinstance(fs.step, WriteBuffer) and fs.step.data
    ]
    ex._readback.plan(layout)
    ex._dims, ex._layout = dims, layout
    ex.stats.dimension_updates += 1
    log.debug("dims set to %s: %d dispatches", dims, ex._program.dispatches)
