"""The per-dims command program: bind groups and the flat tuples `run()` replays into an encoder.

A dims change produces a new `Program`: each live dispatch as one tuple (pipeline, bind groups,
immediate bytes, workgroups), consecutive dispatches sharing one compute pass, and copies in
between. `run()` then only walks tuples; no expression is evaluated and nothing is looked up per
dispatch. Bind groups are rebuilt only when a dispatch's (buffer, offset, size) triple changed,
i.e. when a buffer was reallocated or a range expression moved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import wgpu

from onyxia.core.errors import DeviceError
from onyxia.core.plan import BufferRef, CopyBuffer, Dispatch
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.device import DeviceContext, ExecutorStats, wgpu_boundary
from onyxia.runtime.layout import CopyValues, DimsLayout, DispatchValues, FlatStep
from onyxia.runtime.pipelines import PipelineCache, PipelineEntry

__all__ = ["DispatchState", "Program", "build_program", "commit_dispatch", "encode", "prepare_dispatch"]

DispatchCommand = tuple[object, ...]  # (pipeline, group, uniform group | None, immediates, nbytes, x, y, z)


@dataclass
class Program:
    """`segments`: (True, [DispatchCommand]) for a compute pass, (False, copy args) for a copy."""

    segments: list[tuple[bool, object]] = field(default_factory=list)
    dispatches: int = 0


@dataclass(eq=False)
class DispatchState:
    """GPU objects of one dispatch that outlive a dims change; `key` says what its group binds."""

    node: str
    pipeline: PipelineEntry
    bindings: tuple[tuple[int, BufferRef], ...]
    uniform: wgpu.GPUBuffer | None = None
    uniform_group: wgpu.GPUBindGroup | None = None
    key: tuple[object, ...] | None = None
    group: wgpu.GPUBindGroup | None = None
    written: bytes | None = None  # immediates last written to `uniform`


def prepare_dispatch(
    fs: FlatStep, pipelines: PipelineCache, pool: BufferPool, ctx: DeviceContext, stats: ExecutorStats
) -> DispatchState:
    """Pipeline (cached) and, on the uniform fallback, this dispatch's own immediates buffer."""
    assert isinstance(fs.step, Dispatch)
    entry = pipelines.pipeline(fs.step, fs.node)
    state = DispatchState(fs.node, entry, tuple((b.binding, b.buffer) for b in fs.step.bindings))
    if entry.uniform_layout is not None:
        state.uniform = pool.create_uniform(f"{fs.node}/immediates", fs.immediate_size)
        resource = {"buffer": state.uniform, "offset": 0, "size": state.uniform.size}
        with wgpu_boundary(DeviceError, f"node '{fs.node}': creating the immediates bind group"):
            state.uniform_group = ctx.device.create_bind_group(
                layout=entry.uniform_layout, entries=[{"binding": 0, "resource": resource}]
            )
        stats.bind_groups_created += 1
    return state


def commit_dispatch(
    state: DispatchState, values: DispatchValues, pool: BufferPool, ctx: DeviceContext, stats: ExecutorStats
) -> None:
    """Bring the bind group and uniform immediates in line with `values` (skipped dispatches: no-op)."""
    if values.workgroups is None:
        return
    resources = []
    for (binding, ref), (offset, size) in zip(state.bindings, values.ranges):
        buffer = pool.get(ref)
        bound = min(buffer.size - offset, ctx.max_binding_size) if size is None else size
        resources.append((binding, buffer, offset, bound))
    key = tuple(resources)
    if key != state.key:
        entries = [
            {"binding": b, "resource": {"buffer": buf, "offset": off, "size": size}} for b, buf, off, size in resources
        ]
        with wgpu_boundary(DeviceError, f"node '{state.node}': creating its bind group"):
            state.group = ctx.device.create_bind_group(layout=state.pipeline.layout, entries=entries)
        state.key = key
        stats.bind_groups_created += 1
    if state.uniform is not None and values.immediates != state.written:
        ctx.queue.write_buffer(state.uniform, 0, values.immediates)
        state.written = values.immediates


def build_program(
    flat: list[FlatStep], states: list[DispatchState | None], layout: DimsLayout, pool: BufferPool
) -> Program:
    program = Program()
    current: list[DispatchCommand] | None = None
    for fs, state, values in zip(flat, states, layout.steps):
        if isinstance(values, DispatchValues) and values.workgroups is not None:
            assert state is not None
            if current is None:
                current = []
                program.segments.append((True, current))
            uniform = state.uniform_group
            immediates = b"" if uniform is not None else values.immediates
            current.append(
                (state.pipeline.pipeline, state.group, uniform, immediates, len(immediates), *values.workgroups)
            )
            program.dispatches += 1
        elif isinstance(values, CopyValues) and values.size:
            assert isinstance(fs.step, CopyBuffer)
            current = None
            src, dst = pool.get(fs.step.src), pool.get(fs.step.dst)
            program.segments.append((False, (src, values.src_offset, dst, values.dst_offset, values.size)))
    return program


def encode(encoder: wgpu.GPUCommandEncoder, program: Program) -> None:
    """Replay `program`; the hot loop of `run()`, so it does nothing but wgpu calls."""
    for is_pass, payload in program.segments:
        if not is_pass:
            encoder.copy_buffer_to_buffer(*payload)  # type: ignore[misc]
            continue
        compute = encoder.begin_compute_pass()
        for pipeline, group, uniform, immediates, nbytes, x, y, z in payload:  # type: ignore[attr-defined]
            compute.set_pipeline(pipeline)
            compute.set_bind_group(0, group)
            if uniform is not None:
                compute.set_bind_group(1, uniform)
            elif nbytes:
                compute.set_immediates(0, immediates, 0, nbytes)
            compute.dispatch_workgroups(x, y, z)
        compute.end()
