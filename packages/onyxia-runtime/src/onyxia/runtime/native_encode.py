"""`program.encode` through wgpu-native's C entry points: the same commands, without wgpu-py's per-call work.

Per dispatch, wgpu-py's `set_bind_group` allocates a cffi array for the (empty) dynamic offsets,
`set_immediates` builds a memoryview and two cffi casts and checks ranges, and each call passes an
error-capturing proxy: about 7 us on lavapipe where the four C calls take about 1.5 us. Encoding a
Gemma-3-270m decode step (523 dispatches) takes 3.9 ms through the API and 1.5 ms here, most of a
3 ms host budget.

No error is lost: wgpu-core records an invalid pass command and reports it from `finish()`, which
still goes through wgpu-py (inside `run()`'s `wgpu_boundary`). The wrappers in the program's tuples
keep the pipelines and bind groups alive; only their `_internal` handles are passed. Those handles
and `wgpu.backends.wgpu_native._api` are wgpu-py internals (as of 0.32), so `native_encoder` returns
None, and the executor uses `program.encode`, when they are missing, when the device is another
backend's, or when the `native_encode` setting (``ONYXIA_NATIVE_ENCODE=0``) asks for the plain API
(to rule this path out).
"""

from __future__ import annotations

from collections.abc import Callable

import wgpu

from onyxia.core.settings import settings
from onyxia.runtime.program import Program

__all__ = ["Encoder", "native_encoder"]

Encoder = Callable[[wgpu.GPUCommandEncoder, Program], None]


def native_encoder(device: wgpu.GPUDevice) -> Encoder | None:
    """An `encode` replacement for `device`, or None where only the public API is usable."""
    if not settings().native_encode:
        return None
    try:
        from wgpu.backends.wgpu_native import _api

        lib, null, from_buffer = _api.lib, _api.ffi.NULL, _api.ffi.from_buffer
        set_pipeline = lib.wgpuComputePassEncoderSetPipeline
        set_group = lib.wgpuComputePassEncoderSetBindGroup
        set_immediates = lib.wgpuComputePassEncoderSetImmediates
        dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups
        native_device = _api.GPUDevice
    except (ImportError, AttributeError):
        return None
    if not isinstance(device, native_device):
        return None

    def encode_native(encoder: wgpu.GPUCommandEncoder, program: Program) -> None:
        """`program.encode`'s loop, state skipping included, with C calls in the pass."""
        for is_pass, commands in program.segments:
            if not is_pass:
                encoder.copy_buffer_to_buffer(*commands)  # type: ignore[misc]
                continue
            compute = encoder.begin_compute_pass()
            handle = compute._internal  # type: ignore[attr-defined]
            bound_pipeline = bound_group = bound_immediates = None
            for pipeline, group, uniform, immediates, nbytes, x, y, z in commands:  # type: ignore[misc, attr-defined]
                if pipeline is not bound_pipeline:
                    set_pipeline(handle, pipeline._internal)
                    bound_pipeline, bound_immediates = pipeline, None
                if group is not bound_group:
                    set_group(handle, 0, group._internal, 0, null)
                    bound_group = group
                if uniform is not None:
                    set_group(handle, 1, uniform._internal, 0, null)
                elif nbytes and immediates != bound_immediates:
                    set_immediates(handle, 0, from_buffer(immediates), nbytes)
                    bound_immediates = immediates
                dispatch(handle, x, y, z)
            compute.end()

    return encode_native
