"""`commands.encode`'s calls through wgpu-native's C entry points, without wgpu-py's per-call work.

Per dispatch, wgpu-py's `set_bind_group` allocates a cffi array for the (empty) dynamic offsets,
`set_immediates` builds a memoryview and two cffi casts and checks ranges, and each call passes an
error-capturing proxy: about 7 us on lavapipe where the four C calls take about 1.5 us. Encoding a
Gemma-3-270m decode step (523 dispatches) takes 3.9 ms through the API and 1.5 ms here, most of a
3 ms host budget. `encode` walks the program either way; this module supplies only its `PassCalls`:
the C functions themselves (their argument shapes are the ones `encode` uses) and `_internal` as
the handle. The immediates go to C as the command's `bytes` (cffi passes a bytes object to a
``void *`` parameter as a pointer to its data; the call copies them into the pass).

No error is lost: wgpu-core records an invalid pass command and reports it from `finish()`, which
still goes through wgpu-py (inside `run()`'s `wgpu_boundary`). The wrappers in the program's commands
keep the pipelines and bind groups alive; only their `_internal` handles are passed. Those handles
and `wgpu.backends.wgpu_native._api` are wgpu-py internals (as of 0.32), so `native_calls` returns
None, and the executor uses `commands.PUBLIC_CALLS`, when they are missing, when the device is another
backend's, or when the `native_encode` setting (``ONYXIA_NATIVE_ENCODE=0``) asks for the plain API
(to rule this path out).
"""

from __future__ import annotations

import operator

import wgpu

from onyxia.core.settings import settings
from onyxia.runtime.commands import PassCalls

__all__ = ["native_calls"]


def native_calls(device: wgpu.GPUDevice) -> PassCalls | None:
    """`encode`'s calls for `device` through C, or None where only the public API is usable."""
    if not settings().native_encode:
        return None
    try:
        from wgpu.backends.wgpu_native import _api

        lib = _api.lib
        calls = PassCalls(
            operator.attrgetter("_internal"),
            lib.wgpuComputePassEncoderSetPipeline,
            lib.wgpuComputePassEncoderSetBindGroup,
            lib.wgpuComputePassEncoderSetImmediates,
            lib.wgpuComputePassEncoderDispatchWorkgroups,
            _api.ffi.NULL,
        )
        native_device = _api.GPUDevice
    except (ImportError, AttributeError):
        return None
    if not isinstance(device, native_device):
        return None
    return calls
