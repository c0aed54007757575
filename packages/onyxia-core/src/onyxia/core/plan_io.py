"""A `CompiledModel` as one file and back: the plan cache's format (plain data: no onnx, no wgpu).

A plan is plain data except its arrays (weights, folded constants) and its replanner. The structure is
pickled (protocol 5, C speed: an LLM's plan has thousands of steps); every array and `TensorValue` is
written raw after it, 64-byte aligned, and comes back as a read-only view of the file's memory map, so
loading costs no copy and no RAM until the runtime uploads it. An array that is a memory map of one of the
model's own external data files (a weight the compile did not change) is stored as (file, offset) instead:
a 700 MB embedding is not written twice, and the file's size and modification time, recorded with the
plan, must match when it is read. Replanners cannot be saved (they hold the graph and the compiler): each is
written as its `input_dims` and the caller's `replanner` factory makes a stand-in on load.

Layout: ``MAGIC | format u32 | 0 u32 | meta length u64 | blob length u64 | sha256(meta) | crc32(blob) u32``
(padded to 128 bytes), the pickle, padding, the blob. `read_plan` checks the magic, the format, the length
and both checksums before it unpickles anything, and unpickles only classes of ``onyxia.*`` and a few
builtins. The checksums catch a torn or corrupted file, not a forged one: the cache lives in the user's own
cache directory, and whoever can write there can change the user's code as well.
"""

from __future__ import annotations

import hashlib
import io
import mmap
import os
import pickle
import struct
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import OnyxiaError
from onyxia.core.plan import CompiledModel, Replanner, RunSubplan
from onyxia.core.symbolic import SymbolicDim
from onyxia.core.values import TensorValue

__all__ = ["FORMAT", "PlanFormatError", "ReplannerFactory", "file_range", "read_plan", "walk_plans", "write_plan"]

MAGIC = b"ONYXPLAN"
FORMAT = 1  # bump when the layout or the meaning of a field changes
_HEADER = struct.Struct("<8sIIQQ32sI")
_HEADER_SIZE = 128  # _HEADER.size (68) padded
_ALIGN = 64
_SAFE_BUILTINS = frozenset({"set", "frozenset", "tuple", "list", "dict", "int", "float", "str", "bytes", "bool"})
_SAFE_OTHER = {
    ("copyreg", "_reconstructor"),
    ("copyreg", "__newobj__"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
}

ReplannerFactory = Callable[[int, Mapping[str, tuple[SymbolicDim, ...]]], Replanner | None]


class PlanFormatError(OnyxiaError):
    """A plan file that is not one `read_plan` can trust (truncated, corrupted, another format), or a plan
    holding something `write_plan` cannot store."""


def walk_plans(plan: CompiledModel) -> list[CompiledModel]:
    """`plan` and every subplan (If branches, Loop bodies) in a fixed pre-order: how replanners are numbered."""
    found = [plan]
    for op in plan.operations:
        for step in op.steps:
            if isinstance(step, RunSubplan):
                for sub in step.plans:
                    found.extend(walk_plans(sub))
    return found


def file_range(array: np.ndarray) -> tuple[Path, int] | None:
    """(file, byte offset) when `array` is a contiguous view into a `np.memmap` of a file (itself, or a base of
    it: ``np.asarray`` of a memory map is a plain array over the map's memory)."""
    if not array.flags.c_contiguous or array.nbytes == 0:
        return None
    base: object = array
    while base is not None and getattr(base, "filename", None) is None:
        base = getattr(base, "base", None)
    name, mapping = getattr(base, "filename", None), getattr(base, "_mmap", None)
    if name is None or not isinstance(mapping, mmap.mmap):
        return None
    start = int(getattr(base, "offset", 0))
    start -= start % mmap.ALLOCATIONGRANULARITY  # np.memmap maps from the granularity below its offset
    origin = np.frombuffer(mapping, np.uint8).__array_interface__["data"][0]
    position = array.__array_interface__["data"][0] - origin
    if position < 0 or position + array.nbytes > len(mapping):
        return None
    return Path(str(name)), position + start


class _Writer(pickle.Pickler):
    def __init__(self, out: IO[bytes], data_dir: Path | None, replanners: dict[int, int]) -> None:
        super().__init__(out, protocol=5)
        self.data_dir = os.path.realpath(data_dir) if data_dir is not None else None
        self.sources: dict[str, int] = {}
        self.replanners = replanners
        self.arrays: list[np.ndarray] = []
        self.blob_size = 0
        self.refs: dict[int, tuple[Any, ...]] = {}  # id(array) -> its reference: an array shared is stored once

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, TensorValue):
            return ("tv", int(obj.dtype), obj.dims, obj.name, self._array_ref(obj.numpy()))
        if isinstance(obj, np.ndarray):
            return ("nd", self._array_ref(obj))
        if id(obj) in self.replanners:
            return ("replanner", self.replanners[id(obj)], dict(getattr(obj, "input_dims", {})))
        if callable(getattr(obj, "replan", None)):
            raise PlanFormatError(f"a replanner ({type(obj).__name__}) outside the plans being written")
        return None

    def _array_ref(self, array: np.ndarray) -> tuple[Any, ...]:
        if id(array) not in self.refs:
            self.refs[id(array)] = self._new_ref(array)
        return self.refs[id(array)]

    def _new_ref(self, array: np.ndarray) -> tuple[Any, ...]:
        if array.dtype.hasobject or array.dtype.fields is not None:
            raise PlanFormatError(f"an array of dtype {array.dtype} cannot be stored raw")
        located = file_range(array)
        if located is not None and self.data_dir is not None:
            file = os.path.realpath(located[0])
            if Path(file).is_relative_to(self.data_dir):
                index = self.sources.setdefault(file, len(self.sources))
                return ("file", index, located[1], array.dtype.str, array.shape)
        offset = -(-self.blob_size // _ALIGN) * _ALIGN
        self.arrays.append(array)
        self.blob_size = offset + array.nbytes
        return ("blob", offset, array.dtype.str, array.shape)


def write_plan(out: IO[bytes], plan: CompiledModel, extras: Any = None, data_dir: Path | None = None) -> list[Path]:
    """Write `plan` (and `extras`, plain data) to the seekable `out`; returns the files it refers to.

    An array mapped from a file under `data_dir` (the model's folder) is stored as a reference into it."""
    plans = walk_plans(plan)
    replanners = {id(p.replanner): i for i, p in enumerate(plans) if p.replanner is not None}
    buffer = io.BytesIO()
    writer = _Writer(buffer, data_dir, replanners)
    try:
        writer.dump({"plan": plan, "extras": extras})
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise PlanFormatError(f"plan '{plan.metadata.get('graph', '?')}' holds something unstorable: {e}") from e
    sources = list(writer.sources)
    identities = [(p, *_identity(Path(p))) for p in sources]
    meta = pickle.dumps(identities, protocol=5) + buffer.getvalue()
    blob_start = -(-(_HEADER_SIZE + len(meta)) // _ALIGN) * _ALIGN
    out.write(b"\0" * _HEADER_SIZE + meta + b"\0" * (blob_start - _HEADER_SIZE - len(meta)))
    crc, position = 0, 0
    for array in writer.arrays:
        pad = -position % _ALIGN
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8).data  # 0-d and any item size alike
        crc = zlib.crc32(data, zlib.crc32(b"\0" * pad, crc))
        out.write(b"\0" * pad)
        out.write(data)
        position += pad + len(data)
    out.seek(0)
    out.write(_HEADER.pack(MAGIC, FORMAT, 0, len(meta), position, hashlib.sha256(meta).digest(), crc))
    out.seek(0, os.SEEK_END)
    return [Path(p) for p in sources]


def _identity(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


class _Reader(pickle.Unpickler):
    def __init__(self, meta: IO[bytes], blob: memoryview, replanner: ReplannerFactory, sources: list[Path]) -> None:
        super().__init__(meta)
        self.blob, self.replanner, self.sources = blob, replanner, sources
        self.maps: dict[int, np.memmap] = {}

    def find_class(self, module: str, name: str) -> Any:
        allowed = (module == "builtins" and name in _SAFE_BUILTINS) or (module, name) in _SAFE_OTHER
        found = super().find_class(module, name) if allowed or module.startswith("onyxia.") else None
        if found is None or not (allowed or isinstance(found, type)):
            raise PlanFormatError(f"plan file refers to {module}.{name}, which a plan never holds")
        return found

    def persistent_load(self, pid: Any) -> Any:
        kind = pid[0]
        if kind == "tv":
            _, dtype, dims, name, ref = pid
            view = self._array(ref)
            return TensorValue(DataType(dtype), dims, lambda: view, name=name)
        if kind == "nd":
            return self._array(pid[1])
        if kind == "replanner":
            return self.replanner(pid[1], pid[2])
        raise PlanFormatError(f"unknown persistent reference {kind!r}")

    def _array(self, ref: tuple[Any, ...]) -> np.ndarray:
        dtype, shape = np.dtype(ref[-2]), tuple(ref[-1])
        count = int(np.prod(shape, dtype=np.int64))
        if ref[0] == "blob":
            array: np.ndarray = np.frombuffer(self.blob, dtype, count, ref[1])
            return array.reshape(shape)
        index, offset = ref[1], ref[2]
        if index not in self.maps:
            self.maps[index] = np.memmap(self.sources[index], dtype=np.uint8, mode="r")
        data: np.ndarray = self.maps[index][offset : offset + count * dtype.itemsize]
        viewed: np.ndarray = data.view(dtype).reshape(shape)
        return viewed


def read_plan(path: Path, replanner: ReplannerFactory | None = None) -> tuple[CompiledModel, Any]:
    """The plan and extras `write_plan` wrote to `path`; raises `PlanFormatError` for any file it cannot
    trust. `replanner(index, input_dims)` stands in for plan `index` of `walk_plans`' replanner."""
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < _HEADER_SIZE:
            raise PlanFormatError(f"{path}: {size} bytes, shorter than a plan file's header")
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    magic, fmt, _, meta_len, blob_len, digest, crc = _HEADER.unpack_from(mapped, 0)
    if magic != MAGIC or fmt != FORMAT:
        raise PlanFormatError(f"{path}: not a plan file of format {FORMAT} (magic {magic!r}, format {fmt})")
    blob_start = -(-(_HEADER_SIZE + meta_len) // _ALIGN) * _ALIGN
    if blob_start + blob_len != size:
        raise PlanFormatError(f"{path}: {size} bytes; the header describes {blob_start + blob_len}")
    meta = mapped[_HEADER_SIZE : _HEADER_SIZE + meta_len]
    blob = memoryview(mapped)[blob_start:]
    if hashlib.sha256(meta).digest() != digest or zlib.crc32(blob) != crc:
        raise PlanFormatError(f"{path}: checksum mismatch (the file is corrupted)")
    stream, sources = io.BytesIO(meta), []
    factory = replanner or (lambda index, dims: None)
    try:
        for name, *identity in _Reader(stream, blob, factory, []).load():
            source = Path(name)
            if not source.is_file() or list(_identity(source)) != identity:
                raise PlanFormatError(f"{path}: the model's data file {source} changed since the plan was written")
            sources.append(source)
        loaded = _Reader(stream, blob, factory, sources).load()  # the second pickle, where the first ended
    except PlanFormatError:
        raise
    except Exception as e:  # a well-formed file of an older layout: ignored like a corrupted one
        raise PlanFormatError(f"{path}: cannot read the plan: {type(e).__name__}: {e}") from e
    return loaded["plan"], loaded["extras"]
