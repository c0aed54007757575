"""Reading outputs back: the outputs a run wants are packed into one staging buffer, mapped once.

Sizes and shapes depend on the dims, so they are replanned at every dims change; offsets depend on
which outputs a run wants as well, so each run packs its own. Outputs left out of a run stay on the
GPU and cost neither a copy nor staging room: an LLM reads back one token id and leaves its logits
and cache where they are, so the staging buffer is a few bytes, not the size of the KV cache.
Behind the outputs goes the run-time error word (`run_errors.ErrorWord`, 8 bytes per checking
node) whenever anything is read back, so its check rides on the same copy-and-map.
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
from onyxia.runtime.run_errors import ErrorWord

__all__ = ["OutputReadback", "staged_bytes"]


def staged_bytes(nbytes: int) -> int:
    """Room a tensor takes in the staging buffer: mapped reads want 8-byte aligned offsets."""
    return (padded_nbytes(nbytes) + 7) // 8 * 8 if nbytes else 0


@dataclass(frozen=True)
class _Output:
    """One output under the current dims: where it lives on the GPU and what it reads back as."""

    tensor: int
    name: str
    dtype: DataType
    buffer: wgpu.GPUBuffer | None  # None when empty
    nbytes: int
    shape: tuple[int, ...]


class OutputReadback:
    """Packs and reads back the outputs of `compiled` a run asks for."""

    def __init__(self, compiled: CompiledModel, pool: BufferPool) -> None:
        self.pool = pool
        self.names = [compiled.tensors[t].name for t in compiled.outputs]
        self._specs = [
            (t, compiled.tensors[t].name, compiled.tensors[t].dtype, BufferRef(tensor=t)) for t in compiled.outputs
        ]
        inputs = {pool.owner(BufferRef(tensor=t)) for t in compiled.inputs}
        # outputs updated in place in an input's buffer (a KV cache): state, rarely read back
        self._state = {ref for *_, ref in self._specs if pool.owner(ref) in inputs}
        self._layout: DimsLayout | None = None  # the committed dims' sizes and shapes, read by `encode`
        # per staging slot: the outputs and offsets of the last run encoded into it, and where it put
        # the error word (None: nowhere); two slots let a run be submitted before the last one is read
        self._placed: list[list[tuple[_Output, int]]] = [[], []]
        self._errors_at: list[int | None] = [None, None]
        self.errors = ErrorWord(compiled, pool)

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
        """Outputs read back from here on take their buffers, sizes and shapes from `layout` (committed dims).
        Only the outputs a run wants are looked up, when it is encoded: a decode step reads 1 of its 38."""
        self._layout = layout

    def _output(self, tid: int, name: str, dtype: DataType, ref: BufferRef) -> _Output:
        layout = self._layout
        if layout is None:
            raise RuntimeError("OutputReadback.encode before plan: no dims committed")
        nbytes = layout.buffer_bytes[ref]
        buffer = self.pool.get(ref) if nbytes else None
        return _Output(tid, name, dtype, buffer, nbytes, layout.output_shapes[tid])

    def preallocate(self, sizes: Mapping[BufferRef, int]) -> None:
        """Size the staging buffer up front for every output but in-place state at `sizes` (the
        largest dims), so reading them back never reallocates; state read back grows it then."""
        outputs = sum(staged_bytes(sizes[ref]) for *_, ref in self._specs if ref not in self._state)
        self.pool.ensure_staging(outputs + staged_bytes(self.errors.nbytes))

    def encode(self, encoder: wgpu.GPUCommandEncoder, wanted: set[str], slot: int = 0) -> int:
        """Record the copies of the `wanted` outputs into staging buffer `slot`, packed in output order
        (an output listed twice is copied once), then the error word; returns the output bytes copied
        (the word's go to `stats.error_word_bytes`)."""
        placed, offsets, end = [], {}, 0
        for tid, name, dtype, ref in self._specs:
            if name not in wanted:
                continue
            output = self._output(tid, name, dtype, ref)
            if output.tensor not in offsets and output.buffer is not None:
                offsets[output.tensor] = end
                end += staged_bytes(output.nbytes)
            placed.append((output, offsets.get(output.tensor, 0)))
        self._placed[slot], self._errors_at[slot] = placed, None
        if not end:
            return 0
        staging = self.pool.ensure_staging(end + staged_bytes(self.errors.nbytes), slot)
        word = self.errors.encode(encoder, staging, end)
        if word:
            self._errors_at[slot] = end
            self.pool.stats.error_word_bytes += word
        copied = 0
        for output, offset in placed:
            if output.buffer is not None and offsets.pop(output.tensor, None) is not None:
                size = padded_nbytes(output.nbytes)
                encoder.copy_buffer_to_buffer(output.buffer, 0, staging, offset, size)
                copied += size
        return copied

    def read(self, slot: int = 0) -> dict[str, np.ndarray]:
        """After the submit: map staging buffer `slot` once and convert the outputs its last `encode` placed."""
        placed, errors_at = self._placed[slot], self._errors_at[slot]
        end = max((offset + staged_bytes(o.nbytes) for o, offset in placed if o.buffer is not None), default=0)
        if errors_at is not None:
            end = errors_at + staged_bytes(self.errors.nbytes)
        raw = self.pool.read_staging(end, slot) if end else b""
        if errors_at is not None:
            self.errors.check(raw, errors_at)
        return {o.name: from_gpu(o.dtype, raw, offset, o.shape) for o, offset in placed}
