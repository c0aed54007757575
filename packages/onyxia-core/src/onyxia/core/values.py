"""Weight and constant data, numpy-backed and loaded only when read.

Large models keep weights in external files; a `TensorValue` holds a loader (usually a memory map)
so parsing a 2 GB model costs no RAM until the runtime streams each tensor to the GPU.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable

import numpy as np

from onyxia.core.dtypes import DataType

__all__ = ["TensorValue", "release_file_pages"]


class TensorValue:
    """An immutable tensor of `dtype` and static `dims`, materialised by `numpy()`.

    4-bit dtypes are kept as packed uint8 bytes (two elements per byte, low nibble first),
    exactly as ONNX stores them.
    """

    def __init__(
        self,
        dtype: DataType,
        dims: tuple[int, ...],
        data: np.ndarray | Callable[[], np.ndarray],
        *,
        name: str = "",
    ) -> None:
        self.dtype = dtype
        self.dims = tuple(int(d) for d in dims)
        self.name = name
        self._array = data if isinstance(data, np.ndarray) else None
        self._loader = None if isinstance(data, np.ndarray) else data

    @staticmethod
    def from_numpy(array: np.ndarray, name: str = "") -> TensorValue:
        array = np.asarray(array)
        return TensorValue(DataType.from_numpy(array.dtype), array.shape, array, name=name)

    @property
    def numel(self) -> int:
        return int(np.prod(self.dims, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        if self.dtype in (DataType.UINT4, DataType.INT4):
            return (self.numel + 1) // 2
        return self.numel * self.dtype.itemsize

    @property
    def is_loaded(self) -> bool:
        return self._array is not None

    def numpy(self) -> np.ndarray:
        """The data (loaded on first use, then cached; a memory map stays a memory map)."""
        if self._array is None:
            assert self._loader is not None
            self._array = self._loader()
        return self._array

    def release(self) -> None:
        """Give back the host memory this value can recreate: a loaded array that the loader can load
        again is dropped, and a memory map's resident pages leave the process. The runtime calls it
        once a weight is on the GPU; a later `numpy()` loads again."""
        if self._loader is None or self._array is None:
            return
        release_file_pages(self._array)
        self._array = None

    def __repr__(self) -> str:
        state = "loaded" if self.is_loaded else "lazy"
        return f"TensorValue({self.name!r}, {self.dtype.name}, {list(self.dims)}, {state})"


def release_file_pages(array: np.ndarray) -> None:
    """Drop the resident pages of a memory-mapped `array` from this process (a no-op otherwise).

    The mapping stays valid: a later read faults the pages back in from the file (or the page cache)."""
    mapping = _backing_mmap(array)
    if mapping is None or not hasattr(mapping, "madvise") or array.nbytes == 0:
        return
    origin = np.frombuffer(mapping, np.uint8).__array_interface__["data"][0]
    start = array.__array_interface__["data"][0] - origin
    page_start = start - start % mmap.PAGESIZE
    end = start + array.nbytes
    if page_start >= 0 and end <= len(mapping):
        mapping.madvise(mmap.MADV_DONTNEED, page_start, end - page_start)


def _backing_mmap(array: np.ndarray) -> mmap.mmap | None:
    base: object = array
    while base is not None:
        if isinstance(base, mmap.mmap):
            return base
        found = getattr(base, "_mmap", None)  # np.memmap keeps its mapping here
        if isinstance(found, mmap.mmap):
            return found
        base = getattr(base, "base", None)
    return None
