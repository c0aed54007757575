"""Stream initializers into `<model>.onnx_data` as they are generated, the way `onnx.save` would lay them out.

`onnx.save_model(..., save_as_external_data=True)` needs every tensor in memory at once (twice, while it
serializes); appending each tensor's chunks as they come keeps the 270m synthesis near one chunk of
memory. The result matches onnx's own layout: one file beside the model, tensors back to back in
initializer order, and tensors under onnx's default `size_threshold` (1024, measured as
`sys.getsizeof(raw_data)`) kept inline.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["SIZE_THRESHOLD", "ExternalDataWriter"]

SIZE_THRESHOLD = 1024  # onnx.external_data_helper.convert_model_to_external_data's default
_BYTES_OVERHEAD = sys.getsizeof(b"")  # onnx compares sys.getsizeof(raw_data), not len(raw_data)


class ExternalDataWriter:
    """Owns the open data file; `tensor()` returns an inline or external-data TensorProto."""

    def __init__(self, model_path: Path, suffix: str = "_data") -> None:
        self.location = f"{model_path.name}{suffix}"
        self.path = model_path.parent / self.location
        self._file = self.path.open("wb")
        self._offset = 0

    def __enter__(self) -> ExternalDataWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._file.close()

    def tensor(
        self, name: str, shape: tuple[int, ...], dtype: np.dtype, chunks: Iterable[np.ndarray]
    ) -> onnx.TensorProto:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if nbytes + _BYTES_OVERHEAD < SIZE_THRESHOLD:
            parts = [np.asarray(c, dtype=dtype) for c in chunks]
            return numpy_helper.from_array(np.concatenate(parts).reshape(shape), name)
        written = 0
        for chunk in chunks:
            data = np.ascontiguousarray(chunk, dtype=dtype)
            written += self._file.write(data.data)
        if written != nbytes:
            raise ValueError(f"initializer {name!r}: wrote {written} bytes; expected {nbytes} for shape {shape}")
        proto = onnx.TensorProto(name=name, dims=shape, data_type=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
        proto.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", self._offset), ("length", nbytes)):
            entry = proto.external_data.add()
            entry.key, entry.value = key, str(value)
        self._offset += nbytes
        return proto
