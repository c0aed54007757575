"""Weight upload that keeps the host's peak memory near the size of the weights themselves.

On lavapipe, and on any adapter whose memory is the host's, a GPU buffer is host RAM. A plain
`queue.write_buffer` of every weight then holds each byte three times at the peak: the file pages
it was read from (memory-mapped external data stays resident once touched), wgpu's staging copy
(freed only after a submit that runs it has finished) and the buffer itself. So the upload goes in
slices: after each slice the queue is drained, which retires its staging copy, and the slice's file
pages are dropped (they re-fault from the page cache if read again). The peak is then the buffers
plus about one slice, and a discrete GPU's host keeps only a slice.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import numpy as np

from onyxia.core.errors import DeviceError, PlanningError
from onyxia.core.plan import BufferRef, CompiledModel, PlanTensor, TensorRole
from onyxia.core.values import TensorValue, release_file_pages
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.convert import storage_bytes, to_gpu
from onyxia.runtime.device import wgpu_boundary

__all__ = ["SLICE_BYTES", "upload_weights"]

SLICE_BYTES = 32 << 20


def upload_weights(
    compiled: CompiledModel, pool: BufferPool, slice_bytes: int | None = None, skip: Collection[int] = ()
) -> int:
    """Create and fill the buffer of every weight and constant of `compiled` but those (by tensor id) in
    `skip`, which a plan switch found already in place; returns the bytes written."""
    queue, written, pending = pool.ctx.queue, 0, 0
    slice_bytes = slice_bytes or SLICE_BYTES
    last = None
    for tensor, data in _weights(compiled, skip):
        ref = BufferRef(tensor=tensor.id)
        pool.ensure(ref, data.nbytes)
        buffer = last = pool.get(ref)
        for start in range(0, data.size, slice_bytes):
            piece = data[start : start + slice_bytes]
            with wgpu_boundary(DeviceError, f"uploading weight '{tensor.name}'"):
                queue.write_buffer(buffer, start, piece)
            release_file_pages(piece)  # write_buffer has copied it into staging
            written += piece.size
            pending += piece.size
            if pending >= slice_bytes:
                _drain(pool, buffer)
                pending = 0
        if isinstance(tensor.data, TensorValue):
            tensor.data.release()  # a repacked copy or a map's pages: the GPU holds the data now
    if pending and last is not None:
        _drain(pool, last)
    return written


def _weights(compiled: CompiledModel, skip: Collection[int]) -> Iterator[tuple[PlanTensor, np.ndarray]]:
    """Each tensor with data, as the bytes its buffer holds."""
    for t in compiled.tensors.values():
        if t.id in skip:
            continue
        if t.role is TensorRole.SYMBOLIC or t.data is None:
            if t.role is TensorRole.WEIGHT:
                raise PlanningError(f"weight '{t.name}' has no data to upload")
            continue
        array = t.data.numpy() if isinstance(t.data, TensorValue) else np.asarray(t.data)
        gpu = to_gpu(f"weight '{t.name}'", t.dtype, array, PlanningError)
        if gpu.nbytes != t.nbytes:
            raise PlanningError(
                f"weight '{t.name}': data of shape {list(array.shape)} is {gpu.nbytes} bytes on the GPU; "
                f"its plan dims [{', '.join(map(str, t.dims))}] need {t.nbytes}"
            )
        if gpu.size:
            yield t, storage_bytes(gpu)


def _drain(pool: BufferPool, buffer: object) -> None:
    """Wait until the queue has run every write so far, so wgpu frees their staging copies.

    Reading 4 bytes back is the public way to wait for the queue in wgpu-py 0.32
    (`on_submitted_work_done_sync` is broken there)."""
    with wgpu_boundary(DeviceError, "waiting for the weight upload"):
        pool.ctx.queue.read_buffer(buffer, 0, 4)
