"""The command program `run()` replays, and `encode`, the one routine that replays it.

A program is a list of segments: a `ComputePass` of `DispatchCommand`s (consecutive dispatches share
one pass) or a `CopyCommand` of its own. Commands are NamedTuples, not dataclasses: the hot loop
unpacks eight fields per dispatch, and a tuple unpacks in one bytecode.

`encode` holds everything about walking a program: passes, copies, the state a pass already holds
(not set again), and for `profile_run` one pass per dispatch bracketed by timestamps. What differs
between wgpu-py's public API and wgpu-native's C entry points (`native_encode`) is only the thin
`PassCalls` layer: how a pass or object becomes the handle the calls take, and the four calls.
They take webgpu.h's argument shapes, so the native layer passes its C functions straight through
and the public layer adapts them to wgpu-py's methods.

WebGPU cannot replay a finished command buffer, and wgpu-py 0.32 has bundles only for render
passes (`GPURenderBundleEncoder`), none for compute, so every run records its commands afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import wgpu

__all__ = [
    "PUBLIC_CALLS",
    "ComputePass",
    "CopyCommand",
    "DispatchCommand",
    "PassCalls",
    "Program",
    "Segment",
    "Timestamps",
    "encode",
]


class DispatchCommand(NamedTuple):
    """One live dispatch; `uniform` is the immediates bind group on the uniform fallback, where
    `immediates` is empty (the bytes live in the uniform buffer)."""

    pipeline: wgpu.GPUComputePipeline
    group: wgpu.GPUBindGroup
    uniform: wgpu.GPUBindGroup | None
    immediates: bytes
    nbytes: int
    x: int
    y: int
    z: int


class CopyCommand(NamedTuple):
    """`copy_buffer_to_buffer`'s arguments, in its order."""

    src: wgpu.GPUBuffer
    src_offset: int
    dst: wgpu.GPUBuffer
    dst_offset: int
    size: int


@dataclass
class ComputePass:
    dispatches: list[DispatchCommand] = field(default_factory=list)


Segment = ComputePass | CopyCommand


@dataclass
class Program:
    """`segments` in plan order; `slots` maps each live flat step to where its command sits: (its
    pass, position) for a dispatch, (None, index in `segments`) for a copy, so a dims change that
    moves a step's values replaces that one entry (`program.patch_program`) instead of rebuilding."""

    segments: list[Segment] = field(default_factory=list)
    dispatches: int = 0
    slots: dict[int, tuple[ComputePass | None, int]] = field(default_factory=dict)

    @property
    def copy_bytes(self) -> int:
        """Bytes the program's copies move (a plan copies when an op cannot write in place)."""
        return sum(segment.size for segment in self.segments if isinstance(segment, CopyCommand))


class PassCalls(NamedTuple):
    """The thin layer between `encode` and wgpu, in webgpu.h's argument shapes.

    `handle` turns a compute pass, pipeline or bind group into what the calls take; `null` is the
    empty dynamic-offsets array `set_bind_group` receives after its count of 0."""

    handle: Callable[[Any], Any]
    set_pipeline: Callable[[Any, Any], object]
    set_bind_group: Callable[[Any, int, Any, int, Any], object]
    set_immediates: Callable[[Any, int, bytes, int], object]
    dispatch: Callable[[Any, int, int, int], object]
    null: object


Timestamps = Callable[[int], dict[str, Any]]  # dispatch index -> `timestamp_writes` of its own pass


def _same(obj: Any) -> Any:
    return obj


def _set_pipeline(compute: Any, pipeline: Any) -> None:
    compute.set_pipeline(pipeline)


def _set_bind_group(compute: Any, index: int, group: Any, _count: int, _offsets: object) -> None:
    compute.set_bind_group(index, group)


def _set_immediates(compute: Any, offset: int, data: bytes, nbytes: int) -> None:
    compute.set_immediates(offset, data, 0, nbytes)


def _dispatch(compute: Any, x: int, y: int, z: int) -> None:
    compute.dispatch_workgroups(x, y, z)


PUBLIC_CALLS = PassCalls(_same, _set_pipeline, _set_bind_group, _set_immediates, _dispatch, None)


def encode(
    encoder: wgpu.GPUCommandEncoder,
    program: Program,
    calls: PassCalls = PUBLIC_CALLS,
    timestamps: Timestamps | None = None,
) -> None:
    """Record `program` into `encoder`; the hot loop of `run()`, so it does nothing but wgpu calls.

    State a pass already holds is not set again: the pipeline (consecutive dispatches of one
    shader), the bind group (a node's chunked dispatches), and the immediates (same bytes under the
    same pipeline). Dispatches inside one pass need no barriers from us: WebGPU makes each dispatch
    its own usage scope and orders storage writes before later reads within the pass.

    With `timestamps` each dispatch gets a pass of its own whose `timestamp_writes` bracket it
    (wgpu-py exposes no writes inside a pass): the profile's extra pass boundaries."""
    handle, set_pipeline, set_bind_group, set_immediates, dispatch, null = calls
    index = 0
    for segment in program.segments:
        if isinstance(segment, CopyCommand):
            encoder.copy_buffer_to_buffer(*segment)
            continue
        runs = [segment.dispatches] if timestamps is None else [[c] for c in segment.dispatches]
        for commands in runs:
            if timestamps is None:
                compute = encoder.begin_compute_pass()
            else:
                compute = encoder.begin_compute_pass(timestamp_writes=timestamps(index))
            index += len(commands)
            h = handle(compute)
            bound_pipeline: object = None
            bound_group: object = None
            bound_immediates: bytes | None = None
            for pipeline, group, uniform, immediates, nbytes, x, y, z in commands:
                if pipeline is not bound_pipeline:
                    set_pipeline(h, handle(pipeline))
                    bound_pipeline, bound_immediates = pipeline, None
                if group is not bound_group:
                    set_bind_group(h, 0, handle(group), 0, null)
                    bound_group = group
                if uniform is not None:
                    set_bind_group(h, 1, handle(uniform), 0, null)
                elif nbytes and immediates != bound_immediates:
                    set_immediates(h, 0, immediates, nbytes)
                    bound_immediates = immediates
                dispatch(h, x, y, z)
            compute.end()
