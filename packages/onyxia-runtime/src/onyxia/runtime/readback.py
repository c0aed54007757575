"""Reading outputs back: every output the caller wants is copied into one staging buffer, mapped once.

Where each output lands in the staging buffer depends on the dims, so the plan is redone at every
dims change; outputs left out of a run stay on the GPU and cost no copy (an LLM reads back one token
id and leaves its logits and cache where they are).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
import wgpu

from onyxia.core.dtypes import DataType
from onyxia.core.errors import InputError
from onyxia.core.plan import BufferRef, CompiledModel
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.convert import from_gpu, padded_nbytes
from onyxia.runtime.layout import DimsLayout

__all__ = ["OutputReadback", "staged_bytes"]


def staged_bytes(nbytes: int) -> int:
    """Room a tensor takes in the staging buffer: mapped reads want 8-byte aligned offsets."""
    return (padded_nbytes(nbytes) + 7) // 8 * 8 if nbytes else 0


@dataclass(frozen=True)
class _Copy:
    name: str
    buffer: wgpu.GPUBuffer
    offset: int  # in the staging buffer
    size: int


@dataclass(frozen=True)
class _Output:
    name: str
    dtype: DataType
    offset: int
    shape: tuple[int, ...]


class OutputReadback:
    """The staging layout of `compiled`'s outputs under the current dims."""

    def __init__(self, compiled: CompiledModel, pool: BufferPool) -> None:
        self.pool = pool
        self.names = [compiled.tensors[t].name for t in compiled.outputs]
        self._specs = [
            (t, compiled.tensors[t].name, compiled.tensors[t].dtype, BufferRef(tensor=t)) for t in compiled.outputs
        ]
        self._copies: list[_Copy] = []
        self._outputs: list[_Output] = []

    def select(self, outputs: Collection[str] | None) -> set[str]:
        """The outputs a run reads back: all by default; a name that is no output is an error."""
        names = set(self.names)
        if outputs is None:
            return names
        unknown = sorted(set(outputs) - names)
        if unknown:
            raise InputError(f"run(outputs=...): {unknown} are not outputs; the outputs are {sorted(names)}")
        return set(outputs)

    def plan(self, layout: DimsLayout) -> None:
        """Staging offsets per output for `layout`'s sizes (an output listed twice is copied once)."""
        self._copies, self._outputs, offset, placed = [], [], 0, {}
        for tid, name, dtype, ref in self._specs:
            nbytes = layout.buffer_bytes[ref]
            if tid not in placed and nbytes:
                placed[tid] = offset
                self._copies.append(_Copy(name, self.pool.get(ref), offset, padded_nbytes(nbytes)))
                offset += staged_bytes(nbytes)
            self._outputs.append(_Output(name, dtype, placed.get(tid, 0), layout.output_shapes[tid]))
        if offset:
            self.pool.ensure_staging(offset)

    def preallocate(self, sizes: Mapping[BufferRef, int]) -> None:
        """Size the staging buffer for every output at `sizes` (the largest dims) up front."""
        self.pool.ensure_staging(sum(staged_bytes(sizes[ref]) for _, _, _, ref in self._specs))

    def encode(self, encoder: wgpu.GPUCommandEncoder, wanted: set[str]) -> int:
        """Record the copies of the `wanted` outputs into the staging buffer; returns the bytes copied."""
        copied = 0
        for copy in self._copies:
            if copy.name in wanted:
                encoder.copy_buffer_to_buffer(copy.buffer, 0, self.pool.staging, copy.offset, copy.size)
                copied += copy.size
        return copied

    def read(self, wanted: set[str]) -> dict[str, np.ndarray]:
        """After the submit: map the staging buffer once and convert the `wanted` outputs."""
        end = max((c.offset + c.size for c in self._copies if c.name in wanted), default=0)
        raw = self.pool.read_staging(end) if end else b""
        return {o.name: from_gpu(o.dtype, raw, o.offset, o.shape) for o in self._outputs if o.name in wanted}
