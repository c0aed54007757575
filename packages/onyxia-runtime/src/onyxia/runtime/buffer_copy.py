"""Copying byte ranges inside one tensor's GPU buffer, between runs, without a host trip.

An LLM session's `n` parallel samples of one prompt share its prefilled prefix: the prefix's rows of every
resident KV cache are copied from the slot that prefilled them into the slots of the other samples
(`onyxia.cli.llm.parallel_samples`), so the prompt is prefilled once. The copies go on the executor's queue,
so they follow every run submitted before (the prefill that wrote the rows) and precede every later one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import wgpu

from onyxia.core.errors import InputError

if TYPE_CHECKING:
    from onyxia.runtime.executor import PlanExecutor

__all__ = ["copy_regions"]


def copy_regions(executor: PlanExecutor, regions: Mapping[str, Sequence[tuple[int, int, int]]]) -> int:
    """Copy (source offset, destination offset, bytes) ranges, each within the buffer of the tensor it is listed
    under (a resident input: its contents persist between runs), in one submit; returns the bytes copied.
    Offsets and sizes are multiples of 4. WebGPU refuses a copy from a buffer to itself, so each tensor's ranges
    go through one scratch buffer: all sources out first, then all destinations in (sources may overlap
    destinations of other ranges only if they are not read after being written: callers copy from one slot
    into others)."""
    with executor._lock:
        checked = {name: _checked(executor, name, ranges) for name, ranges in regions.items()}
        largest = max((sum(size for *_, size in ranges) for _, ranges in checked.values()), default=0)
        if largest == 0:
            return 0
        device = executor.ctx.device
        scratch = device.create_buffer(size=largest, usage=wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST)
        encoder = device.create_command_encoder(label="copy_regions")
        for buffer, ranges in checked.values():
            at = 0
            for src, _, size in ranges:
                encoder.copy_buffer_to_buffer(buffer, src, scratch, at, size)
                at += size
            at = 0
            for _, dst, size in ranges:
                encoder.copy_buffer_to_buffer(scratch, at, buffer, dst, size)
                at += size
        executor.ctx.queue.submit([encoder.finish()])
        scratch.destroy()  # wgpu keeps it alive until the submitted copies have run
        return sum(size for _, ranges in checked.values() for *_, size in ranges)


def _checked(
    executor: PlanExecutor, name: str, ranges: Sequence[tuple[int, int, int]]
) -> tuple[wgpu.GPUBuffer, list[tuple[int, int, int]]]:
    if name not in executor._inputs.resident:
        raise InputError(f"copy_regions(): '{name}' is not a resident input; its contents do not persist")
    buffer = executor._pool.get(executor._ref(name))
    for src, dst, size in ranges:
        bad = [v for v in (src, dst, size) if v < 0 or v % 4]
        if bad or max(src, dst) + size > buffer.size or (src < dst + size and dst < src + size):
            raise InputError(
                f"copy_regions(): '{name}' range ({src}, {dst}, {size}) is unaligned, overlapping or outside its "
                f"{buffer.size} bytes"
            )
    return buffer, [r for r in ranges if r[2]]
