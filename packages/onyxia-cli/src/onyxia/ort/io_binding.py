"""`SessionIOBinding`: inputs and outputs bound to a device before `run_with_iobinding`.

The pattern onnxruntime's WebGPU users follow for a decode loop: bind the cache outputs to
``"webgpu"``, run, take `get_outputs()` and bind them (`bind_ortvalue_input`) as the next step's
cache inputs, so the cache never leaves the GPU; only the outputs bound to ``"cpu"`` are read back.
A WebGPU buffer has no address: `bind_input(..., buffer_ptr)` takes what a device `OrtValue.data_ptr()`
returned (a handle to that value) or, on the host, a real address.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from onyxia.ort.errors import InvalidArgument, ort_error
from onyxia.ort.ort_value import DEVICES, GpuTensor, OrtValue, value_at

if TYPE_CHECKING:
    from onyxia.ort.session import InferenceSession

__all__ = ["SessionIOBinding"]


class SessionIOBinding:
    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self.inputs: dict[str, OrtValue] = {}
        self.outputs: dict[str, str] = {}  # name -> device the output is wanted on
        self._targets: dict[str, OrtValue] = {}  # outputs bound to a given OrtValue
        self._results: list[OrtValue] = []

    def bind_cpu_input(self, name: str, arr_on_cpu: np.ndarray) -> None:
        self.inputs[name] = OrtValue(host=np.asarray(arr_on_cpu))

    def bind_input(
        self, name: str, device_type: str, device_id: int, element_type: Any, shape: Sequence[int], buffer_ptr: int
    ) -> None:
        """`buffer_ptr`: a host address, or a device OrtValue's `data_ptr()` handle (`ort_value.value_at`)."""
        self.inputs[name] = value_at(buffer_ptr, device_type, element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        if not isinstance(ortvalue, OrtValue):
            raise TypeError(
                f"bind_ortvalue_input('{name}'): expected an onyxia.ort.OrtValue, got {type(ortvalue).__name__}"
            )
        self.inputs[name] = ortvalue

    def bind_output(
        self,
        name: str,
        device_type: str = "cpu",
        device_id: int = 0,
        element_type: Any = None,
        shape: Sequence[int] | None = None,
        buffer_ptr: int | None = None,
    ) -> None:
        if buffer_ptr is not None:  # preallocated: written into that memory (host) or value (device handle)
            if shape is None or element_type is None:
                raise ort_error(InvalidArgument, f"bind_output('{name}'): a buffer_ptr needs element_type and shape")
            self.bind_ortvalue_output(name, value_at(buffer_ptr, device_type, element_type, shape))
            return
        device = str(device_type).lower()
        if device not in DEVICES:
            raise RuntimeError(f"Unsupported device type: {device_type} (Onyxia binds outputs to 'cpu' or 'webgpu')")
        self.outputs[name] = device
        self._targets.pop(name, None)

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """The output is written into `ortvalue` (which must have its shape and type) on each run."""
        self.outputs[name] = ortvalue.device_name()
        self._targets[name] = ortvalue

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: uploads and GPU copies are ordered on the device's one queue."""

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: a run's outputs are complete when `run_with_iobinding` returns."""

    def get_outputs(self) -> list[OrtValue]:
        """The last run's outputs, in the order they were bound (device ones still on the GPU)."""
        return list(self._results)

    def get_outputs_as_ortvaluevector(self) -> list[OrtValue]:
        return self.get_outputs()

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        return [value.numpy() for value in self._results]

    def clear_binding_inputs(self) -> None:
        self.inputs.clear()

    def clear_binding_outputs(self) -> None:
        self.outputs.clear()
        self._targets.clear()
        self._results = []

    def store(self, results: dict[str, np.ndarray | GpuTensor], names: list[str]) -> None:
        """Called by the session after a run: `results` by output name, `names` in binding order."""
        values = []
        for name in names:
            value = results[name]
            made = OrtValue(gpu=value) if isinstance(value, GpuTensor) else OrtValue(host=np.asarray(value))
            target = self._targets.get(name)
            if target is not None:
                _write_into(target, made, name)
                made = target
            values.append(made)
        self._results = values


def _write_into(target: OrtValue, value: OrtValue, name: str) -> None:
    if target.shape() != value.shape() or target.data_type() != value.data_type():
        raise ort_error(
            InvalidArgument,
            f"Output '{name}' is {value.data_type()}{value.shape()}, but the OrtValue bound to it is "
            f"{target.data_type()}{target.shape()}",
        )
    target.update_inplace(value.numpy()) if target.gpu is None else _copy_on_device(target.gpu, value.gpu)


def _copy_on_device(dst: GpuTensor, src: GpuTensor | None) -> None:
    from onyxia.ort.device import shared_runtime

    if src is None or src.buffer is None or dst.buffer is None or not src.nbytes:
        return
    device = shared_runtime().ctx.device
    encoder = device.create_command_encoder()
    encoder.copy_buffer_to_buffer(src.buffer, 0, dst.buffer, 0, min(int(src.buffer.size), int(dst.buffer.size)))
    device.queue.submit([encoder.finish()])
