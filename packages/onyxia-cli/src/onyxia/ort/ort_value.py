"""`OrtValue`: a tensor on the host (``"cpu"``) or in a buffer of the shared WebGPU device (``"webgpu"``).

onnxruntime's WebGPU users keep state between runs as device OrtValues: `ortvalue_from_numpy(a,
"webgpu", 0)` uploads once, an output bound to ``"webgpu"`` stays in a device buffer, and feeding it
to the next run (`SessionIOBinding.bind_ortvalue_input`) copies it on the GPU, never through the host.
A device OrtValue owns its buffer, in Onyxia's GPU storage form of its element type (int64 as int32,
bool as u32: `onyxia.runtime.convert`); `numpy()` reads it back to the logical dtype.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
import wgpu

from onyxia.core.dtypes import DataType
from onyxia.core.errors import InputError
from onyxia.ort.device import shared_runtime
from onyxia.ort.feeds import type_of_array
from onyxia.runtime.convert import from_gpu, padded_nbytes, storage_bytes, to_gpu

__all__ = ["DEVICES", "GpuTensor", "OrtValue"]

DEVICES = ("cpu", "webgpu")
_USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST


@dataclass(frozen=True)
class GpuTensor:
    """`nbytes` of `buffer` from offset 0 hold a `dtype` tensor of `shape` in its GPU storage form."""

    buffer: wgpu.GPUBuffer | None  # None: an empty tensor
    dtype: DataType
    shape: tuple[int, ...]
    nbytes: int


def new_buffer(nbytes: int) -> wgpu.GPUBuffer:
    device = shared_runtime().ctx.device
    return device.create_buffer(size=max(padded_nbytes(nbytes), 4), usage=_USAGE)


class OrtValue:
    """One tensor value; made by the class methods, as in onnxruntime."""

    def __init__(self, host: np.ndarray | None = None, gpu: GpuTensor | None = None) -> None:
        if (host is None) == (gpu is None):
            raise TypeError("OrtValue holds either a host array or a device tensor; make one with ortvalue_from_numpy")
        self._host, self._gpu = host, gpu

    @classmethod
    def ortvalue_from_numpy(
        cls, numpy_obj: np.ndarray, device_type: str = "cpu", device_id: int = 0, vendor_id: int = -1
    ) -> OrtValue:
        """`numpy_obj` as a value on `device_type`: ``"cpu"`` keeps the array (no copy, as onnxruntime),
        ``"webgpu"`` uploads it to a buffer of the shared device."""
        array = numpy_obj if isinstance(numpy_obj, np.ndarray) else np.asarray(numpy_obj)
        if _device(device_type) == "cpu":
            return cls(host=array)
        dtype = DataType.from_numpy(array.dtype)
        data = to_gpu("OrtValue", dtype, array, InputError)
        buffer = new_buffer(data.nbytes)
        if data.nbytes:
            shared_runtime().ctx.queue.write_buffer(buffer, 0, storage_bytes(data))
        return cls(gpu=GpuTensor(buffer, dtype, tuple(array.shape), data.nbytes))

    @classmethod
    def ortvalue_from_shape_and_type(
        cls,
        shape: Sequence[int],
        element_type: type | np.dtype | int = np.float32,
        device_type: str = "cpu",
        device_id: int = 0,
        vendor_id: int = -1,
    ) -> OrtValue:
        """A zero-filled value (onnxruntime leaves it uninitialised; zeros are one valid such value)."""
        return cls.ortvalue_from_numpy(np.zeros(tuple(shape), _element_dtype(element_type)), device_type, device_id)

    @property
    def gpu(self) -> GpuTensor | None:
        return self._gpu

    def device_name(self) -> str:
        return "cpu" if self._gpu is None else "webgpu"

    def shape(self) -> list[int]:
        return list(self._host.shape if self._host is not None else self._gpu.shape)  # type: ignore[union-attr]

    def _numpy_dtype(self) -> np.dtype:
        return self._host.dtype if self._host is not None else self._gpu.dtype.numpy  # type: ignore[union-attr]

    def data_type(self) -> str:
        return type_of_array(np.empty(0, self._numpy_dtype()))

    def element_type(self) -> int:
        return int(onnx.helper.np_dtype_to_tensor_dtype(self._numpy_dtype()))

    def tensor_size_in_bytes(self) -> int:
        return int(np.prod(self.shape(), dtype=np.int64)) * self._numpy_dtype().itemsize

    def has_value(self) -> bool:
        return True

    def is_tensor(self) -> bool:
        return True

    def is_sparse_tensor(self) -> bool:
        return False

    def is_tensor_sequence(self) -> bool:
        return False

    def numpy(self) -> np.ndarray:
        """The value on the host (a device value is read back: one GPU -> host copy)."""
        if self._host is not None:
            return self._host
        gpu = self._gpu
        assert gpu is not None
        if gpu.buffer is None or not gpu.nbytes:
            return np.zeros(gpu.shape, gpu.dtype.numpy)
        size = min(padded_nbytes(gpu.nbytes), int(gpu.buffer.size))
        raw = shared_runtime().ctx.queue.read_buffer(gpu.buffer, 0, size)
        return from_gpu(gpu.dtype, raw, 0, gpu.shape)

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:
        """A host value's own memory (no copy) when no other dtype is asked for, as in onnxruntime."""
        array = self.numpy()
        return array if dtype is None or np.dtype(dtype) == array.dtype else array.astype(dtype)

    def data_ptr(self) -> int:
        """A host value's data address; for a device value (a WebGPU buffer has no address) a handle
        `SessionIOBinding.bind_input` resolves in this process while the value lives."""
        key = int(self._host.ctypes.data) if self._host is not None else id(self._gpu)
        _by_pointer[key] = self
        return key

    def __dlpack__(self, *, stream: object = None) -> object:
        """DLPack export of a host value (numpy's); a device value is read back first."""
        return self.numpy().__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU: what DLPack consumers get is a host tensor

    @classmethod
    def from_dlpack(cls, data: object) -> OrtValue:
        """A host value from an object with ``__dlpack__`` or from a DLPack capsule."""
        source = data if hasattr(data, "__dlpack__") else _Capsule(data)
        return cls(host=np.from_dlpack(source))

    @classmethod
    def ortvalue_from_numpy_with_onnx_type(cls, data: np.ndarray, /, onnx_element_type: int) -> OrtValue:
        """`data`'s bytes read as the ONNX element type `onnx_element_type` (same item size)."""
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(onnx_element_type))
        if dtype.itemsize != data.dtype.itemsize:
            raise RuntimeError(
                f"element type {onnx_element_type} has {dtype.itemsize} bytes, the array's {data.dtype} has {data.dtype.itemsize}"
            )
        return cls(host=data.view(dtype))

    def update_inplace(self, np_arr: np.ndarray) -> None:
        """Overwrite the value with `np_arr` of the same shape and type (on its device)."""
        if list(np_arr.shape) != self.shape() or np_arr.dtype != self._numpy_dtype():
            raise ValueError(
                f"update_inplace: got {np_arr.dtype}{list(np_arr.shape)}, the OrtValue is "
                f"{self._numpy_dtype()}{self.shape()}"
            )
        if self._host is not None:
            np.copyto(self._host, np_arr)
            return
        gpu = self._gpu
        assert gpu is not None
        if gpu.buffer is not None and gpu.nbytes:
            data = to_gpu("OrtValue", gpu.dtype, np_arr, InputError)
            shared_runtime().ctx.queue.write_buffer(gpu.buffer, 0, storage_bytes(data))

    def __repr__(self) -> str:
        return f"OrtValue({self.data_type()}, shape={self.shape()}, device={self.device_name()!r})"


class _Capsule:
    """A bare DLPack capsule, for `np.from_dlpack`, which takes only objects with ``__dlpack__``."""

    def __init__(self, capsule: object) -> None:
        self._capsule = capsule

    def __dlpack__(self, *, stream: object = None, **kwargs: object) -> object:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


_by_pointer: weakref.WeakValueDictionary[int, OrtValue] = weakref.WeakValueDictionary()


def value_at(pointer: int, device_type: str, element_type: object, shape: Sequence[int]) -> OrtValue:
    """The value `data_ptr()` returned `pointer` for, seen as `shape` of `element_type`; on the host, a
    pointer from elsewhere is read in place (as onnxruntime does, the caller keeps the memory alive)."""
    dtype = _element_dtype(element_type)
    dims = tuple(int(d) for d in shape)
    known = _by_pointer.get(int(pointer))
    if known is not None and known.gpu is not None:
        gpu = known.gpu
        nbytes = int(np.prod(dims, dtype=np.int64)) * gpu.dtype.gpu_numpy.itemsize
        if gpu.dtype.numpy != dtype or nbytes > gpu.nbytes:
            raise RuntimeError(
                f"bind_input: the device value is {gpu.dtype.numpy}{list(gpu.shape)}, not {dtype}{list(dims)}"
            )
        return OrtValue(gpu=GpuTensor(gpu.buffer, gpu.dtype, dims, nbytes))
    if _device(device_type) != "cpu":
        raise RuntimeError(f"bind_input: {pointer:#x} is no live WebGPU OrtValue's data_ptr()")
    count = int(np.prod(dims, dtype=np.int64))
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(pointer))
    return OrtValue(host=np.frombuffer(memoryview(raw), dtype, count).reshape(dims))


def _element_dtype(element_type: object) -> np.dtype:
    """numpy's type, or the ONNX element type code onnxruntime also takes."""
    if isinstance(element_type, int):
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(element_type))
    return np.dtype(element_type)  # type: ignore[call-overload]


def _device(device_type: str) -> str:
    name = str(device_type).lower()
    if name not in DEVICES:
        raise RuntimeError(f"Unsupported device type: {device_type} (Onyxia's OrtValues live on 'cpu' or 'webgpu')")
    return name
