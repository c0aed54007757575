"""The command program: bind groups and the flat tuples `run()` replays into an encoder.

Each live dispatch is one tuple (pipeline, bind groups, immediate bytes, workgroups); consecutive
dispatches share one compute pass; each copy is a segment of its own. `run()` then only walks
tuples; no expression is evaluated and nothing is looked up per dispatch. A dims change patches the
entries of the steps whose values moved (`patch_program`); only a step turning 0-size or back
changes the segments and rebuilds the program. Bind groups are rebuilt only when a dispatch's
(buffer, offset, size) triples changed, i.e. when a buffer was reallocated or a range moved.

WebGPU cannot replay a finished command buffer, and wgpu-py 0.32 has bundles only for render
passes (`GPURenderBundleEncoder`), none for compute, so every run records its commands afresh.
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

__all__ = [
    "rebinds",
    "DispatchState",
    "Program",
    "build_program",
    "commit_dispatch",
    "encode",
    "patch_program",
    "prepare_dispatch",
]

DispatchCommand = tuple[object, ...]  # (pipeline, group, uniform group | None, immediates, nbytes, x, y, z)


@dataclass
class Program:
    """`segments`: (True, [DispatchCommand]) for a compute pass, (False, copy args) for a copy.

    `slots` maps each live flat step to where its command sits: (the pass's command list, position)
    for a dispatch, (`segments`, index) for a copy, so a dims change that moves a step's values
    replaces that one entry (`patch_program`) instead of rebuilding."""

    segments: list[tuple[bool, object]] = field(default_factory=list)
    dispatches: int = 0
    slots: dict[int, tuple[list, int]] = field(default_factory=dict)  # type: ignore[type-arg]


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
    current: list[DispatchCommand] | None = None
    for index, (fs, state, values) in enumerate(zip(flat, states, layout.steps)):
        command = _command(fs, state, values, pool)
        if command is None:
            continue
        if isinstance(values, CopyValues):
            current = None
            program.slots[index] = (program.segments, len(program.segments))
            program.segments.append((False, command))
            continue
        if current is None:
            current = []
            program.segments.append((True, current))
        program.slots[index] = (current, len(current))
        current.append(command)
        program.dispatches += 1
    return program


def patch_program(
    program: Program, index: int, fs: FlatStep, state: DispatchState | None, values: object, pool: BufferPool
) -> bool:
    """Replace step `index`'s command after its values moved; False when the step was skipped and now
    runs or the reverse (a 0-size dispatch or copy), which changes the segments: rebuild instead."""
    slot = program.slots.get(index)
    command = _command(fs, state, values, pool)
    if slot is None or command is None:
        return slot is None and command is None
    entries, position = slot
    entries[position] = (False, command) if isinstance(values, CopyValues) else command
    return True


def _command(fs: FlatStep, state: DispatchState | None, values: object, pool: BufferPool) -> DispatchCommand | None:
    """A live step's command: dispatch tuple or copy args; None for a 0-size step or a WriteBuffer."""
    if isinstance(values, DispatchValues) and values.workgroups is not None:
        assert state is not None
        uniform = state.uniform_group
        immediates = b"" if uniform is not None else values.immediates
        return (state.pipeline.pipeline, state.group, uniform, immediates, len(immediates), *values.workgroups)
    if isinstance(values, CopyValues) and values.size:
        assert isinstance(fs.step, CopyBuffer)
        src, dst = pool.get(fs.step.src), pool.get(fs.step.dst)
        return (src, values.src_offset, dst, values.dst_offset, values.size)
    return None


def encode(encoder: wgpu.GPUCommandEncoder, program: Program) -> None:
    """Replay `program`; the hot loop of `run()`, so it does nothing but wgpu calls.

    State a pass already holds is not set again: the pipeline (consecutive dispatches of one
    shader), the bind group (a node's chunked dispatches), and the immediates (same bytes under the
    same pipeline). Dispatches inside one pass need no barriers from us: WebGPU makes each dispatch
    its own usage scope and orders storage writes before later reads within the pass."""
    for is_pass, commands in program.segments:
        if not is_pass:
            encoder.copy_buffer_to_buffer(*commands)  # type: ignore[misc]
            continue
        compute = encoder.begin_compute_pass()
        bound_pipeline = bound_group = bound_immediates = None
        for pipeline, group, uniform, immediates, nbytes, x, y, z in commands:  # type: ignore[misc, attr-defined]
            if pipeline is not bound_pipeline:
                compute.set_pipeline(pipeline)
                bound_pipeline, bound_immediates = pipeline, None
            if group is not bound_group:
                compute.set_bind_group(0, group)
                bound_group = group
            if uniform is not None:
                compute.set_bind_group(1, uniform)
            elif nbytes and immediates != bound_immediates:
                compute.set_immediates(0, immediates, 0, nbytes)
                bound_immediates = immediates
            compute.dispatch_workgroups(x, y, z)
        compute.end()


def rebinds(state: DispatchState, values: DispatchValues, before: object) -> bool:
    """Whether `commit_dispatch` has work: ranges moved (no buffer was reallocated on this path), the
    dispatch comes back from 0 size, or its immediates live in a uniform buffer."""
    return state.uniform is not None or not isinstance(before, DispatchValues) or before.ranges != values.ranges
