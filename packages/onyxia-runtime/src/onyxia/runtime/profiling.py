"""Opt-in GPU profiling: `PlanExecutor.profile_run()` replays the program with a timestamp pair per dispatch.

`commands.encode` given `DispatchTimer.writes` records it; a normal `run()` passes none and pays
nothing for it. Each dispatch gets its own compute pass whose `timestamp_writes` bracket it
(WebGPU's 'timestamp-query'; wgpu-py exposes no writes inside a pass), so the profiled run has pass boundaries the normal program does not: per-dispatch times are
right, their sum can exceed a normal run's GPU time by the extra barriers. The device must have been
opened with the feature (`Runtime(profiling=True)`).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import wgpu

from onyxia.core.errors import DeviceError
from onyxia.core.plan import CompiledModel
from onyxia.runtime.commands import PassCalls, Program, encode
from onyxia.runtime.device import DeviceContext, wgpu_boundary
from onyxia.runtime.layout import DimsLayout, DispatchValues, FlatStep
from onyxia.runtime.readback import OutputReadback

__all__ = ["TIMESTAMP_FEATURE", "DispatchTime", "DispatchTimer", "RunProfile", "dispatch_labels", "profile"]

TIMESTAMP_FEATURE = "timestamp-query"
_QUERIES_PER_SET = 4096  # WebGPU's largest query set
_RESOLVE_USAGE = wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC
_READ_USAGE = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST


@dataclass(frozen=True)
class DispatchTime:
    """One dispatch of the program: its node, the node's op type, and its GPU time."""

    node: str
    op_type: str
    gpu_ns: int


@dataclass
class RunProfile:
    """What `profile_run()` measured; `outputs` are what `run()` would have returned."""

    outputs: dict[str, np.ndarray]
    dispatches: list[DispatchTime] = field(default_factory=list)
    host_prepare_ns: int = 0  # binding inputs and queueing writes, as run() does before encoding
    host_encode_ns: int = 0  # encoding the normal program (and its copies) into a command buffer

    @property
    def gpu_ns(self) -> int:
        return sum(d.gpu_ns for d in self.dispatches)

    @property
    def host_ns(self) -> int:
        """Host time `run()` spends before its submit."""
        return self.host_prepare_ns + self.host_encode_ns


class DispatchTimer:
    """Query sets for `count` dispatches (two timestamps each) and the buffers to read them back."""

    def __init__(self, ctx: DeviceContext, count: int) -> None:
        if TIMESTAMP_FEATURE not in ctx.features:
            raise DeviceError(
                f"profiling needs the device feature '{TIMESTAMP_FEATURE}'; open the runtime with "
                f"Runtime(profiling=True) on an adapter that has it (device features: {sorted(ctx.features)})"
            )
        self.ctx, self.count = ctx, count
        per_set = _QUERIES_PER_SET // 2
        sizes = [min(per_set, count - start) for start in range(0, count, per_set)]
        with wgpu_boundary(DeviceError, "profiling: creating timestamp query sets"):
            self.sets = [ctx.device.create_query_set(type="timestamp", count=2 * n) for n in sizes]
            nbytes = max(8, 16 * count)
            self.resolved = ctx.device.create_buffer(size=nbytes, usage=_RESOLVE_USAGE)
            self.readback = ctx.device.create_buffer(size=nbytes, usage=_READ_USAGE)

    def writes(self, index: int) -> dict[str, Any]:
        """`timestamp_writes` for the pass around dispatch `index`."""
        per_set = _QUERIES_PER_SET // 2
        slot = 2 * (index % per_set)
        query_set = self.sets[index // per_set]
        return {"query_set": query_set, "beginning_of_pass_write_index": slot, "end_of_pass_write_index": slot + 1}

    def resolve(self, encoder: wgpu.GPUCommandEncoder) -> None:
        """Resolve every set into one buffer (each set's slice starts 32 KiB in, 256-aligned as required)."""
        for i, query_set in enumerate(self.sets):
            encoder.resolve_query_set(query_set, 0, query_set.count, self.resolved, i * _QUERIES_PER_SET * 8)
        encoder.copy_buffer_to_buffer(self.resolved, 0, self.readback, 0, self.readback.size)

    def read(self) -> list[int]:
        """Per dispatch: end minus begin timestamp, in nanoseconds (after the submit)."""
        with wgpu_boundary(DeviceError, "profiling: reading timestamps back"):
            self.readback.map_sync(wgpu.MapMode.READ)
            try:
                stamps = np.frombuffer(self.readback.read_mapped(), np.uint64).astype(np.int64)
            finally:
                self.readback.unmap()
        self.resolved.destroy()
        self.readback.destroy()
        for query_set in self.sets:
            query_set.destroy()
        pairs = stamps[: 2 * self.count].reshape(-1, 2)
        return [max(0, int(end - begin)) for begin, end in pairs]


def dispatch_labels(
    compiled: CompiledModel, flat: list[FlatStep], layout: DimsLayout, expected: int
) -> list[tuple[str, str]]:
    """(node, op type) of each dispatch the program encodes under `layout`, in program order."""
    op_types = {op.name: op.op_type for op in compiled.operations}
    labels = [
        (fs.node, op_types.get(fs.node, "?"))
        for fs, values in zip(flat, layout.steps)
        if isinstance(values, DispatchValues) and values.workgroups is not None
    ]
    if len(labels) != expected:
        raise DeviceError(f"profile_run(): {len(labels)} live dispatches, the program has {expected}")
    return labels


class _Profiled(Protocol):
    ctx: DeviceContext
    compiled: CompiledModel
    _flat: list[FlatStep]
    _layout: DimsLayout | None
    _program: Program
    _calls: PassCalls
    _readback: OutputReadback

    def _prepare(self, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None, caller: str) -> set[str]: ...

    def _encode_tail(self, encoder: wgpu.GPUCommandEncoder, wanted: set[str], slot: int = 0) -> None: ...


def profile(executor: _Profiled, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None) -> RunProfile:
    """`PlanExecutor.profile_run()`: the run, timed per dispatch, and the host time before submit."""
    started = time.perf_counter_ns()
    wanted = executor._prepare(inputs, outputs, "profile_run()")
    assert executor._layout is not None
    prepared = time.perf_counter_ns()
    scratch = executor.ctx.device.create_command_encoder()  # timed like run()'s encode, never submitted
    encode(scratch, executor._program, executor._calls)
    scratch.finish()
    encoded = time.perf_counter_ns()
    labels = dispatch_labels(executor.compiled, executor._flat, executor._layout, executor._program.dispatches)
    timer = DispatchTimer(executor.ctx, len(labels))
    with wgpu_boundary(DeviceError, "profile_run(): encoding or submitting the plan"):
        encoder = executor.ctx.device.create_command_encoder()
        encode(encoder, executor._program, executor._calls, timer.writes)
        executor._encode_tail(encoder, wanted)
        timer.resolve(encoder)
        executor.ctx.queue.submit([encoder.finish()])
    result = executor._readback.read()
    times = [DispatchTime(node, op, ns) for (node, op), ns in zip(labels, timer.read())]
    return RunProfile(result, times, prepared - started, encoded - prepared)
