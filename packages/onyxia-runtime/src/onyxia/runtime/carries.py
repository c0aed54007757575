"""Carried state: after each run, outputs copied into resident inputs on the GPU, never via the host.

An LLM's present KV cache becomes the next step's past this way wherever the plan cannot alias the
two into one buffer. The copies are re-planned at every dims change, since their sizes move.
"""

from __future__ import annotations

import wgpu

from onyxia.core.plan import BufferRef
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.convert import padded_nbytes
from onyxia.runtime.layout import DimsLayout

__all__ = ["Carries"]


class Carries:
    def __init__(self, pool: BufferPool) -> None:
        self.pool = pool
        self.pairs: list[tuple[BufferRef, BufferRef]] = []  # (output, resident input)
        self.copies: list[tuple[wgpu.GPUBuffer, wgpu.GPUBuffer, int]] = []

    def add(self, src: BufferRef, dst: BufferRef) -> None:
        """Carry `src` into `dst` after each run, unless one buffer already serves both (aliased)."""
        if self.pool.owner(src) != self.pool.owner(dst):
            self.pairs.append((src, dst))

    def plan(self, layout: DimsLayout) -> None:
        self.copies = [
            (self.pool.get(src), self.pool.get(dst), padded_nbytes(layout.buffer_bytes[src]))
            for src, dst in self.pairs
            if layout.buffer_bytes[src]
        ]

    def encode(self, encoder: wgpu.GPUCommandEncoder) -> None:
        for src, dst, size in self.copies:
            encoder.copy_buffer_to_buffer(src, 0, dst, 0, size)
