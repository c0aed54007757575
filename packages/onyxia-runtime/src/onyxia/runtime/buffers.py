"""GPU buffers of one executor: one per storage owner, plus the readback staging.

A plan tensor or scratch buffer owns its buffer unless the plan says otherwise: a view or in-place
state is served by the buffer of the tensor it aliases (chains resolved to the root), and members
of a buffer group (lifetimes that never overlap) by the group's first member. A shared buffer is
sized for its largest member under the current dims.

Buffers only ever grow. A dims change that needs more room reallocates (with headroom, so a
sequence length creeping up one token at a time does not reallocate every step) and the executor
rebuilds the bind groups that referenced the old buffer; a smaller size keeps the big buffer.
Contents of a reallocated buffer are lost, which is fine for everything the pool holds: inputs are
written each run, SYMBOLIC tensors at each dims change, intermediates by the run itself, and
weights never change size.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import wgpu

from onyxia.core.errors import DeviceError
from onyxia.core.plan import BufferRef, CompiledModel
from onyxia.runtime.convert import padded_nbytes, storage_bytes
from onyxia.runtime.device import DeviceContext, ExecutorStats, wgpu_boundary

__all__ = ["BufferPool", "buffer_names", "grown_size"]

log = logging.getLogger(__name__)

_STORAGE_USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
_STAGING_USAGE = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
_GROWTH_ALIGN = 256


def grown_size(needed: int, current: int, limit: int) -> int:
    """Room for `needed` bytes after outgrowing `current`: at least 1.5x, 256-aligned, within `limit`."""
    target = max(needed, current + current // 2)
    target = (target + _GROWTH_ALIGN - 1) // _GROWTH_ALIGN * _GROWTH_ALIGN
    return max(needed, min(target, limit))


def buffer_names(compiled: CompiledModel) -> dict[BufferRef, str]:
    """Every ref's name for labels and errors: the tensor's, or the scratch buffer's label."""
    names = {BufferRef(tensor=t.id): t.name for t in compiled.tensors.values()}
    names.update({BufferRef(scratch=s.id): s.label for op in compiled.operations for s in op.scratch})
    return names


class BufferPool:
    """Owns the storage buffers (keyed by `BufferRef`) and one staging buffer for readback."""

    def __init__(self, ctx: DeviceContext, stats: ExecutorStats, names: dict[BufferRef, str]) -> None:
        self.ctx = ctx
        self.stats = stats
        self.names = names
        self.buffers: dict[BufferRef, wgpu.GPUBuffer] = {}
        self.staging: wgpu.GPUBuffer | None = None
        self.staging_ahead: wgpu.GPUBuffer | None = None  # the second of a pipelined pair (runtime/pending.py)
        # a ref served by another ref's buffer -> that owner, resolved (`CompiledModel.storage_owners`)
        self.aliases: dict[BufferRef, BufferRef] = {}
        self.preserved: set[BufferRef] = set()  # state whose contents must survive growth

    def owner(self, ref: BufferRef) -> BufferRef:
        """The ref whose buffer serves `ref` (itself unless aliased or in a buffer group)."""
        return self.aliases.get(ref, ref)

    def get(self, ref: BufferRef) -> wgpu.GPUBuffer:
        return self.buffers[self.owner(ref)]

    def ensure_all(self, sizes: Mapping[BufferRef, int]) -> None:
        """`ensure` every ref of `sizes`; a shared buffer is sized once, for its largest member, so
        a small member first does not cost a reallocation when a larger one follows."""
        needed: dict[BufferRef, int] = {}
        for ref, nbytes in sizes.items():
            owner = self.owner(ref)
            needed[owner] = max(needed.get(owner, 0), nbytes)
        for owner, nbytes in needed.items():
            self.ensure(owner, nbytes)

    def ensure(self, ref: BufferRef, nbytes: int) -> bool:
        """Make `ref` hold at least `nbytes` (padded); True when a new buffer replaced the old one.

        Growing a preserved (resident state) buffer copies its contents over."""
        ref = self.owner(ref)
        needed = padded_nbytes(nbytes)
        current = self.buffers.get(ref)
        if current is not None and current.size >= needed:
            return False
        size = needed if current is None else grown_size(needed, current.size, self.ctx.max_buffer_size)
        self.buffers[ref] = self._create(self.names[ref], size, _STORAGE_USAGE)
        if current is not None:
            log.debug("buffer '%s' grown from %d to %d bytes", self.names[ref], current.size, size)
            if ref in self.preserved:
                encoder = self.ctx.device.create_command_encoder()
                encoder.copy_buffer_to_buffer(current, 0, self.buffers[ref], 0, current.size)
                self.ctx.queue.submit([encoder.finish()])
            current.destroy()
        return True

    def write(self, ref: BufferRef, array: np.ndarray, offset: int = 0) -> None:
        """Queue a host write of `array` (already in GPU storage form); empty arrays write nothing."""
        if array.size:  # whole 4-byte words in order (int32, float32) go as they are, without a byte view
            aligned = array.flags.c_contiguous and array.nbytes % 4 == 0
            self.ctx.queue.write_buffer(self.get(ref), offset, array if aligned else storage_bytes(array))

    def ensure_staging(self, nbytes: int, slot: int = 0) -> wgpu.GPUBuffer:
        """Staging buffer `slot` (0; 1 for a run submitted while slot 0's is still to be read)."""
        buffer = self.staging if slot == 0 else self.staging_ahead
        needed = padded_nbytes(nbytes)
        if buffer is None or buffer.size < needed:
            current = 0 if buffer is None else buffer.size
            size = needed if buffer is None else grown_size(needed, current, self.ctx.max_buffer_size)
            if buffer is not None:
                buffer.destroy()
            buffer = self._create(f"onyxia/readback{slot or ''}", size, _STAGING_USAGE)
            if slot == 0:
                self.staging = buffer
            else:
                self.staging_ahead = buffer
        return buffer

    def read_staging(self, nbytes: int, slot: int = 0) -> memoryview:
        """Map staging buffer `slot` after the run's submit, copy out `nbytes`, unmap."""
        buffer = self.staging if slot == 0 else self.staging_ahead
        assert buffer is not None
        size = padded_nbytes(nbytes)
        self.stats.staging_maps += 1
        with wgpu_boundary(DeviceError, "reading outputs back"):
            buffer.map_sync(wgpu.MapMode.READ, 0, size)
            try:
                data: memoryview = buffer.read_mapped(0, size)
                return data
            finally:
                buffer.unmap()

    def create_uniform(self, label: str, nbytes: int) -> wgpu.GPUBuffer:
        """A uniform buffer for the immediates fallback: sized to a multiple of 16 as uniforms need."""
        size = max(16, (nbytes + 15) // 16 * 16)
        return self._create(label, size, wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)

    def _create(self, label: str, size: int, usage: int) -> wgpu.GPUBuffer:
        if size > self.ctx.max_buffer_size:
            raise DeviceError(
                f"buffer '{label}': needs {size} bytes; the adapter's max-buffer-size is {self.ctx.max_buffer_size} "
                "(a weight: compile with ONYXIA_MAX_BUFFER_BYTES at most that, and it is uploaded in pieces)"
            )
        with wgpu_boundary(DeviceError, f"allocating buffer '{label}' ({size} bytes)"):
            buffer = self.ctx.device.create_buffer(label=label, size=size, usage=usage)
        self.stats.buffers_created += 1
        return buffer

    def total_bytes(self) -> int:
        """Bytes of every buffer held, staging included; a buffer serving several refs counts once."""
        buffers = {id(b): b for b in self.buffers.values()}
        if self.staging is not None:
            buffers[id(self.staging)] = self.staging
        return sum(int(b.size) for b in buffers.values())

    def release(self) -> None:
        for buffer in self.buffers.values():
            buffer.destroy()
        self.buffers.clear()
        if self.staging is not None:
            self.staging.destroy()
            self.staging = None
