"""The run-time error word: kernels' reports, read back with the outputs, raised as `InputError`.

Checking kernels (the gathers and scatters on their indices, int64 arithmetic on the i32 range)
write an `ErrorCode` and the offending value into their node's slot of one small u32 buffer
(`CompiledModel.error_tensor`, `ERROR_SLOT_WORDS` words a slot; WGSL side: onyxia::errors). A run
that reads outputs back copies the word behind them into the same staging buffer, so checking costs
no extra submit or map, only these bytes. A set slot raises an `InputError` naming the node, op and
value, after the word is cleared (only on that path) so the next run starts clean. A run that reads
nothing back leaves the word as it is: the error is raised by the next run that reads back.
"""

from __future__ import annotations

import numpy as np
import wgpu

from onyxia.core.errors import InputError
from onyxia.core.plan import ERROR_SLOT_WORDS, BufferRef, CompiledModel, ErrorCode, ErrorSlot
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.convert import padded_nbytes

__all__ = ["ErrorWord", "describe_error"]


class ErrorWord:
    """The plan's error slots and their buffer; `nbytes` is 0 for a plan that checks nothing."""

    def __init__(self, compiled: CompiledModel, pool: BufferPool) -> None:
        self.pool = pool
        self.slots: list[ErrorSlot] = list(compiled.error_slots)
        self.ref = None if compiled.error_tensor is None else BufferRef(tensor=compiled.error_tensor)
        self.nbytes = 4 * ERROR_SLOT_WORDS * len(self.slots) if self.ref is not None else 0

    def encode(self, encoder: wgpu.GPUCommandEncoder, staging: wgpu.GPUBuffer, offset: int) -> int:
        """Record the copy of the word to `offset` in the staging buffer; returns the bytes copied."""
        if not self.nbytes or self.ref is None:
            return 0
        size = padded_nbytes(self.nbytes)
        encoder.copy_buffer_to_buffer(self.pool.get(self.ref), 0, staging, offset, size)
        return size

    def check(self, raw: memoryview | bytes, offset: int) -> None:
        """Raise for the first set slot of the word read back at `offset` (clearing the word first)."""
        if not self.nbytes or self.ref is None:
            return
        words = np.frombuffer(raw, np.uint32, ERROR_SLOT_WORDS * len(self.slots), offset).reshape(-1, ERROR_SLOT_WORDS)
        failed = np.flatnonzero(words[:, 0])
        if not failed.size:
            return
        self.pool.write(self.ref, np.zeros(ERROR_SLOT_WORDS * len(self.slots), np.uint32))
        first = int(failed[0])
        message = describe_error(self.slots[first], int(words[first, 0]), int(words[first, 1].view(np.int32)))
        others = [f"'{self.slots[i].node}'" for i in failed[1:4]]
        more = f" (nodes {', '.join(others)}{' ...' if failed.size > 4 else ''} reported errors too)" if others else ""
        raise InputError(f"run(): {message}{more}")


def describe_error(slot: ErrorSlot, code: int, value: int) -> str:
    """One line naming the node, its op and what its kernel found."""
    where = f"node '{slot.node}' ({slot.op_type})"
    detail = f" for {slot.detail}" if slot.detail else ""
    if code == ErrorCode.INDEX_OUT_OF_RANGE:
        return f"{where}: index {value} is out of range{detail} (onnxruntime rejects it too)"
    if code == ErrorCode.INT64_OUT_OF_RANGE:
        inside = f", in {slot.detail}" if slot.detail else ""  # a fused node names its checked members
        return (
            f"{where}{inside}: int64 value out of the 32-bit range Onyxia computes in (int64 is carried as i32 "
            "on the GPU; onnxruntime computes it in 64 bits)"
        )
    if code == ErrorCode.UINT64_OUT_OF_RANGE:
        inside = f", in {slot.detail}" if slot.detail else ""
        return (
            f"{where}{inside}: uint64 value out of the 32-bit range Onyxia computes in (uint64 is carried as u32 "
            "on the GPU, so a result must lie in [0, 2^32 - 1]; onnxruntime computes it in 64 bits)"
        )
    return f"{where}: the kernel reported error code {code} (value {value})"
