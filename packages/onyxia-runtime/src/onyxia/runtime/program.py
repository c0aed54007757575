"""Building the command program (`commands.Program`) from the plan's steps, and keeping it current.

Each live dispatch becomes one `DispatchCommand` (pipeline, bind groups, immediate bytes,
workgroups); consecutive dispatches share one `ComputePass`; each copy is a segment of its own.
`run()` then only walks commands (`commands.encode`); no expression is evaluated and nothing is
looked up per dispatch. A dims change patches the entries of the steps whose values moved
(`patch_program`); only a step turning 0-size or back changes the segments and rebuilds the
program. Bind groups are rebuilt only when a dispatch's (buffer, offset, size) triples changed,
i.e. when a buffer was reallocated or a range moved.
"""

from __future__ import annotations

from dataclasses import dataclass

import wgpu

from onyxia.core.errors import DeviceError
from onyxia.core.plan import BufferRef, CopyBuffer, Dispatch
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.commands import ComputePass, CopyCommand, DispatchCommand, Program
from onyxia.runtime.device import DeviceContext, ExecutorStats, wgpu_boundary
from onyxia.runtime.layout import CopyValues, DimsLayout, DispatchValues, FlatStep, StepValues
from onyxia.runtime.pipelines import PipelineCache, PipelineEntry

__all__ = [
    "DispatchState",
    "build_program",
    "commit_dispatch",
    "patch_program",
    "prepare_dispatch",
    "rebinds",
]


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
    """Commands in plan order, one compute pass per run of live dispatches; copies end a pass (the
    planner's `ComputePassBatchingPass` orders steps so that such runs are long)."""
    program = Program()
    current: ComputePass | None = None
    for index, (fs, state, values) in enumerate(zip(flat, states, layout.steps)):
        command = _command(fs, state, values, pool)
        if command is None:
            continue
        if isinstance(command, CopyCommand):
            current = None
            program.slots[index] = (None, len(program.segments))
            program.segments.append(command)
            continue
        if current is None:
            current = ComputePass()
            program.segments.append(current)
        program.slots[index] = (current, len(current.dispatches))
        current.dispatches.append(command)
        program.dispatches += 1
    return program


def patch_program(
    program: Program, index: int, fs: FlatStep, state: DispatchState | None, values: StepValues, pool: BufferPool
) -> bool:
    """Replace step `index`'s command after its values moved; False when the step was skipped and now
    runs or the reverse (a 0-size dispatch or copy), which changes the segments: rebuild instead."""
    slot = program.slots.get(index)
    command = _command(fs, state, values, pool)
    if slot is None or command is None:
        return slot is None and command is None
    compute, position = slot
    if isinstance(command, CopyCommand):
        program.segments[position] = command
    else:
        assert compute is not None, f"node '{fs.node}': a dispatch's slot names no compute pass"
        compute.dispatches[position] = command
    return True


def _command(
    fs: FlatStep, state: DispatchState | None, values: StepValues, pool: BufferPool
) -> DispatchCommand | CopyCommand | None:
    """A live step's command; None for a 0-size step or a WriteBuffer."""
    if isinstance(values, DispatchValues) and values.workgroups is not None:
        assert state is not None and state.group is not None, f"node '{fs.node}': dispatch not committed"
        uniform = state.uniform_group
        immediates = b"" if uniform is not None else values.immediates
        x, y, z = values.workgroups
        return DispatchCommand(state.pipeline.pipeline, state.group, uniform, immediates, len(immediates), x, y, z)
    if isinstance(values, CopyValues) and values.size:
        assert isinstance(fs.step, CopyBuffer)
        src, dst = pool.get(fs.step.src), pool.get(fs.step.dst)
        return CopyCommand(src, values.src_offset, dst, values.dst_offset, values.size)
    return None


def rebinds(state: DispatchState, values: DispatchValues, before: StepValues) -> bool:
    """Whether `commit_dispatch` has work: ranges moved (no buffer was reallocated on this path), the
    dispatch comes back from 0 size, or its immediates live in a uniform buffer."""
    return state.uniform is not None or not isinstance(before, DispatchValues) or before.ranges != values.ranges
