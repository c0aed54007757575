"""A run whose inputs or outputs stay on the GPU: what `run_with_iobinding` and device `OrtValue`s need.

The executor's GPU feeding (`onyxia.runtime.control_flow.feed_and_run`, the path If/Loop subplans
use) takes host arrays plus tensors already on the device: the device ones are copied into the
plan's input buffers on the GPU, their shapes alone binding dims. The outputs wanted on the device are
then copied into buffers of their own (`GpuTensor`), so the next run, which reuses the plan's buffers,
cannot overwrite a value the caller still holds; the ones wanted on the host are read back.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from onyxia.core.errors import DeviceError
from onyxia.ort.ort_value import GpuTensor, new_buffer
from onyxia.runtime import PlanExecutor
from onyxia.runtime.control_flow import DeviceTensor, feed_and_run
from onyxia.runtime.convert import from_gpu, padded_nbytes
from onyxia.runtime.device import wgpu_boundary

__all__ = ["run_on_device"]


def run_on_device(
    executor: PlanExecutor,
    host: Mapping[str, np.ndarray],
    fed: Mapping[str, GpuTensor],
    wanted: Collection[str],
    on_device: Collection[str],
) -> dict[str, np.ndarray | GpuTensor]:
    """Outputs `wanted` (those in `on_device` as `GpuTensor`s, the rest as arrays) of one run."""
    tensors = {name: DeviceTensor(t.buffer, t.shape, t.nbytes) for name, t in fed.items()}
    results = feed_and_run(executor, host, tensors, "run_with_iobinding()", {})
    plan = executor.compiled
    device = executor.ctx.device
    kept: dict[str, np.ndarray | GpuTensor] = {}
    with wgpu_boundary(DeviceError, "run_with_iobinding(): copying outputs"):
        encoder = device.create_command_encoder()
        for name in dict.fromkeys(on_device):
            out = results[name]
            dtype = plan.tensor_by_name(name).dtype
            buffer = new_buffer(out.nbytes) if out.nbytes else None
            if out.buffer is not None and buffer is not None:
                encoder.copy_buffer_to_buffer(out.buffer, 0, buffer, 0, _copy_size(out.nbytes, out.buffer))
            kept[name] = GpuTensor(buffer, dtype, out.shape, out.nbytes)
        executor.ctx.queue.submit([encoder.finish()])
        for name in wanted:
            if name not in kept:
                out = results[name]
                dtype = plan.tensor_by_name(name).dtype
                if out.buffer is None or not out.nbytes:
                    kept[name] = np.zeros(out.shape, dtype.numpy)
                    continue
                raw = executor.ctx.queue.read_buffer(out.buffer, 0, _copy_size(out.nbytes, out.buffer))
                kept[name] = from_gpu(dtype, raw, 0, out.shape)
    return kept


def _copy_size(nbytes: int, buffer: object) -> int:
    return min(padded_nbytes(nbytes), int(getattr(buffer, "size", 0)))
