"""External tensor data: checked when the model loads, read through one memory map per file.

Models over 2 GB must keep weights outside the protobuf, so the data file is where the bytes
are. Loading only validates each reference (file present, bytes in range); the file is mapped on
the first read and every tensor in it is a view into that one map, so parsing costs no RAM and
the runtime pages in a tensor only when it uploads it.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

import numpy as np

import onnx
from onyxia.core.dtypes import DataType
from onyxia.core.values import TensorValue
from onyxia.onnx.errors import OnnxError
from onyxia.onnx.storage import PACKED_4BIT, storage_count, storage_dtype

__all__ = ["ExternalDataStore"]

log = logging.getLogger(__name__)


class ExternalDataStore:
    """Resolves `location` relative to the model's folder and shares one read-only map per file."""

    def __init__(self, model_path: Path) -> None:
        self.model_path = model_path
        # lexical, not resolved: in the Hugging Face cache the model file is a symlink into blobs/,
        # while its data file sits (as another symlink) beside the link, not beside the blob
        self.base_dir = Path(os.path.abspath(model_path.parent))
        self._maps: dict[Path, np.memmap] = {}

    def lazy_value(self, proto: onnx.TensorProto, dtype: DataType, dims: tuple[int, ...], where: str) -> TensorValue:
        """A `TensorValue` whose loader maps the data on first use; the reference is checked now."""
        if dtype is DataType.STRING:
            raise OnnxError(f"{where}: STRING tensors cannot use external data")
        keys = {entry.key: entry.value for entry in proto.external_data}
        if "location" not in keys:
            raise OnnxError(f"{where}: external data has no 'location' key (found keys {sorted(keys)})")
        path = self._resolve(keys["location"], where)
        offset = _int_key(keys, "offset", where) or 0
        storage = storage_dtype(dtype)
        count = storage_count(dtype, dims)
        needed = count * storage.itemsize
        self._check_range(path, offset, needed, _int_key(keys, "length", where), where)
        shape = (count,) if dtype in PACKED_4BIT else dims
        loader = functools.partial(self._read, path, offset, storage, shape, where)
        return TensorValue(dtype, dims, loader, name=proto.name)

    def _resolve(self, location: str, where: str) -> Path:
        """The data file; a location outside the model's folder is refused (a model must not read arbitrary files)."""
        relative = Path(location)
        path = Path(os.path.normpath(self.base_dir / relative))
        if relative.is_absolute() or not path.is_relative_to(self.base_dir):
            raise OnnxError(
                f"{where}: external data location '{location}' points outside the model folder {self.base_dir}"
            )
        if not path.is_file():
            raise OnnxError(f"{where}: external data file not found: expected {path} (location '{location}')")
        return path

    def _check_range(self, path: Path, offset: int, needed: int, length: int | None, where: str) -> None:
        if length is not None and length < needed:
            raise OnnxError(
                f"{where}: external data length is {length} bytes, but the tensor's shape needs {needed} bytes"
            )
        if length is not None and length > needed:
            log.debug("%s: external data length %d exceeds the %d bytes the shape needs", where, length, needed)
        size = path.stat().st_size
        if offset + needed > size:
            raise OnnxError(
                f"{where}: external data file {path} is too short: it has {size} bytes, but the tensor needs "
                f"bytes {offset}..{offset + needed}"
            )

    def _read(self, path: Path, offset: int, storage: np.dtype, shape: tuple[int, ...], where: str) -> np.ndarray:
        nbytes = int(np.prod(shape, dtype=np.int64)) * storage.itemsize
        if nbytes == 0:
            return np.empty(shape, dtype=storage)
        try:
            if path not in self._maps:
                self._maps[path] = np.memmap(path, dtype=np.uint8, mode="r")
            data = self._maps[path][offset : offset + nbytes]
            if data.size != nbytes:
                raise ValueError(f"file now has {self._maps[path].size} bytes")
            return data.view(storage).reshape(shape)
        except (OSError, ValueError) as e:
            raise OnnxError(f"{where}: cannot read external data from {path}: {e}") from e


def _int_key(keys: dict[str, str], key: str, where: str) -> int | None:
    if key not in keys:
        return None
    try:
        value = int(keys[key])
    except ValueError:
        value = -1
    if value < 0:
        raise OnnxError(f"{where}: external data '{key}' is '{keys[key]}'; expected a non-negative integer")
    return value
