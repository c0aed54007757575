"""Running a plan in segments: submit up to a `ReadValues` step, read a few words back, bind, go on.

A data-dependent size (NonZero's count) is a dim like any other once it is known, so the plan is
laid out and patched by the ordinary dims update; what differs is *when* it is known. The executor
keeps one command program for the whole plan; this module encodes the slice of it before each
`ReadValues` step, submits, copies the step's words into a small staging buffer of its own, maps
it, and hands the words to `update_dimensions` (which patches sizes and immediates, never a
pipeline) before encoding the next slice from the program as the update left it. The last slice
carries the run's tail (carried state, the output copies and the error word) as `run()` does.

Buffers that grow mid-run keep their contents (everything written by the segments before is still
to be read), so during these updates every buffer of the pool counts as preserved. Every read-back
is counted in `ExecutorStats.value_readbacks` and `value_bytes_read_back`; a plan without
`ReadValues` steps never comes here and keeps its single submit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
import wgpu

from onyxia.core.errors import DeviceError
from onyxia.core.plan import HOST_STEPS, ReadValues, RunSubplan
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.commands import ComputePass, PassCalls, Program, encode
from onyxia.runtime.control_flow import Subplans, run_subplan
from onyxia.runtime.device import DeviceContext, ExecutorStats, wgpu_boundary
from onyxia.runtime.inputs import InputBinder
from onyxia.runtime.layout import FlatStep
from onyxia.runtime.readback import OutputReadback

__all__ = ["SegmentedExecutor", "program_range", "run_in_segments"]


class SegmentedExecutor(Protocol):
    """What a segmented run needs of `PlanExecutor` (its state as the latest dims update left it)."""

    ctx: DeviceContext
    stats: ExecutorStats
    _flat: list[FlatStep]
    _program: Program
    _calls: PassCalls
    _pool: BufferPool
    _dims: dict[str, int]
    _readback: OutputReadback
    _inputs: InputBinder

    def update_dimensions(self, dims: Mapping[str, int]) -> None: ...

    _children: Subplans

    def _encode_tail(self, encoder: wgpu.GPUCommandEncoder, wanted: set[str]) -> None: ...


def program_range(program: Program, start: int, stop: int) -> Program:
    """The commands of flat steps [start, stop) of `program`, compute passes cut where the range cuts them."""
    part = Program()
    source: ComputePass | None = None
    current = ComputePass()
    for index in sorted(i for i in program.slots if start <= i < stop):
        compute, position = program.slots[index]
        if compute is None:
            part.segments.append(program.segments[position])
            source = None
            continue
        if compute is not source:
            current, source = ComputePass(), compute
            part.segments.append(current)
        current.dispatches.append(compute.dispatches[position])
        part.dispatches += 1
    return part


def run_in_segments(executor: SegmentedExecutor, wanted: set[str]) -> dict[str, np.ndarray]:
    """One `run()` of a plan with `ReadValues` steps, after `_prepare` queued its inputs."""
    points = [(i, fs.step) for i, fs in enumerate(executor._flat) if isinstance(fs.step, HOST_STEPS)]
    start, dispatches = 0, 0
    for index, step in points:
        part = program_range(executor._program, start, index)
        dispatches += part.dispatches
        if isinstance(step, RunSubplan):
            _submit(executor, part, step.node)
            run_subplan(executor, index, step, lambda raw: _bind(executor, raw))
        else:
            words = _read_words(executor, part, step)
            _bind(executor, {s: int(v) for s, v in zip(step.symbols, words)})
        start = index + 1
    part = program_range(executor._program, start, len(executor._flat))
    with wgpu_boundary(DeviceError, "run(): encoding or submitting the plan's last segment"):
        encoder = executor.ctx.device.create_command_encoder()
        encode(encoder, part, executor._calls)
        executor._encode_tail(encoder, wanted)
        executor.ctx.queue.submit([encoder.finish()])
    executor.stats.runs += 1
    executor.stats.dispatches_encoded = dispatches + part.dispatches
    return executor._readback.read()


def _bind(executor: SegmentedExecutor, raw: dict[str, int]) -> None:
    """Commit dims just read back or decided by a subplan (fills applied, checks run)."""
    read = executor._inputs.values.resolve_read(executor._dims, raw)
    moved = {s: v for s, v in read.items() if executor._dims.get(s) != v}
    if moved:
        _update_keeping_contents(executor, moved)


def _submit(executor: SegmentedExecutor, part: Program, node: str) -> None:
    with wgpu_boundary(DeviceError, f"run(): encoding or submitting the steps before node '{node}'"):
        encoder = executor.ctx.device.create_command_encoder()
        encode(encoder, part, executor._calls)
        executor.ctx.queue.submit([encoder.finish()])


def _read_words(executor: SegmentedExecutor, part: Program, step: ReadValues) -> np.ndarray:
    """Encode and submit `part` with a copy of `step`'s words into the staging buffer (free until the
    run's outputs are copied there at its end), map it, and return the words (i32)."""
    nbytes = 4 * len(step.symbols)
    pool = executor._pool
    with wgpu_boundary(DeviceError, f"run(): reading back {list(step.symbols)}"):
        staging = pool.ensure_staging(nbytes)
        encoder = executor.ctx.device.create_command_encoder()
        encode(encoder, part, executor._calls)
        encoder.copy_buffer_to_buffer(pool.get(step.src), step.offset, staging, 0, nbytes)
        executor.ctx.queue.submit([encoder.finish()])
    raw = pool.read_staging(nbytes)
    executor.stats.value_readbacks += 1
    executor.stats.value_bytes_read_back += nbytes
    return np.frombuffer(bytes(raw), dtype=np.int32)[: len(step.symbols)].copy()  # int64 lives as i32


def _update_keeping_contents(executor: SegmentedExecutor, dims: dict[str, int]) -> None:
    """`update_dimensions` mid-run: a buffer that grows still holds what earlier segments wrote."""
    pool = executor._pool
    saved = pool.preserved
    pool.preserved = saved | set(pool.buffers)
    try:
        executor.update_dimensions(dims)
    finally:
        pool.preserved = saved
