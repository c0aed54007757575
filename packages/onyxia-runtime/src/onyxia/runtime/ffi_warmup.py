"""Parse every C type string wgpu-py uses on Onyxia's path in one pass instead of one pass each.

wgpu-py's native backend is cffi in in-line ABI mode: each `ffi.new("WGPUSomething *")` with a string
cffi has not seen yet runs pycparser over a prelude of every typedef in webgpu.h (432 lines) plus the
one declaration, 25-100 ms on lavapipe's host. A process that opens a device, loads a model and runs
it meets 45 such strings (`PATH_TYPES`): 1.7 s of a new process's start-up, spent re-parsing the same
prelude. `warm` parses all of them as one source, so the prelude is read once (about 60 ms), and
fills cffi's per-string cache with what cffi itself would have computed from that parse.

That cache (`FFI._parsed_types`) and the parser calls that fill it (`_parser._parse`,
`_parser._get_type_and_quals`, `FFI._get_cached_btype`) are cffi internals, unchanged since cffi 1.0.
Everything here is guarded: a missing or changed internal, or a string that does not parse, leaves the
cache as it was and cffi parses lazily as before, so the worst case is the old start-up time. The
upstream fix (a prelude of only the typedef names the string uses) is tools/upstream/; once cffi has
it this module can go.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["PATH_TYPES", "warm"]

log = logging.getLogger(__name__)

# What wgpu-py 0.32 asks cffi to parse on Runtime() -> load_model -> run (measured with
# tools/startup_profile.py's type-string log); spelled exactly as wgpu-py spells them, spaces included.
PATH_TYPES: tuple[str, ...] = (
    # adapter and device (wgpu/backends/wgpu_native/_api.py: request_adapter, request_device)
    "WGPUInstanceDescriptor *",
    "WGPUAdapter[]",
    "WGPUAdapterInfo *",
    "WGPUChainedStruct *",
    "WGPUChainedStruct * ",
    "WGPUNativeLimits *",
    "WGPULimits *",
    "WGPURequestAdapterOptions *",
    "WGPURequestAdapterCallbackInfo *",
    "void(WGPURequestAdapterStatus, WGPUAdapter, WGPUStringView, void *, void *)",
    "char []",
    "WGPUQueueDescriptor *",
    "WGPUDeviceExtras *",
    "WGPUDeviceLostCallbackInfo *",
    "void(WGPUDevice const *, WGPUDeviceLostReason, WGPUStringView, void *, void *)",
    "WGPUUncapturedErrorCallbackInfo *",
    "void(WGPUDevice const *, WGPUErrorType, WGPUStringView, void *, void *)",
    "WGPUFeatureName[]",
    "WGPUDeviceDescriptor *",
    "WGPURequestDeviceCallbackInfo *",
    "void(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView, void *, void *)",
    # shaders, layouts, pipelines (runtime/pipelines.py)
    "WGPUShaderSourceWGSL *",
    "WGPUShaderModuleDescriptor *",
    "WGPUBufferBindingLayout *",
    "WGPUBindGroupLayoutEntry *",
    "WGPUBindGroupLayoutEntry[]",
    "WGPUBindGroupLayoutDescriptor *",
    "WGPUBindGroupLayout[]",
    "WGPUPipelineLayoutDescriptor *",
    "WGPUComputeState *",
    "WGPUComputePipelineDescriptor *",
    # buffers, uploads, the queue drain and readback (runtime/buffers.py, upload.py, readback.py)
    "WGPUBufferDescriptor *",
    "uint8_t []",
    "uint8_t *",
    "uintptr_t",
    "intptr_t",
    "WGPUCommandEncoderDescriptor *",
    "WGPUCommandBufferDescriptor *",
    "WGPUCommandBuffer[]",
    "WGPUBufferMapCallbackInfo *",
    "void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)",
    # bind groups and the compute pass (runtime/program.py, commands.py)
    "WGPUBindGroupEntry *",
    "WGPUBindGroupEntry[]",
    "WGPUBindGroupDescriptor *",
    "WGPUComputePassDescriptor *",
)

_done = threading.Lock()
_warmed = False


def warm(types: Iterable[str] = PATH_TYPES) -> int:
    """Parse `types` into wgpu-py's cffi cache in one pass (once per process for the default set);
    returns how many were added, 0 when the cache already had them or the internals are not there."""
    global _warmed
    default = types is PATH_TYPES
    with _done:
        if default and _warmed:
            return 0
        _warmed = _warmed or default
    try:
        from wgpu.backends.wgpu_native._ffi import ffi
    except ImportError:
        return 0
    try:
        return _parse_all(ffi, list(types))
    except Exception as e:  # any change in cffi's internals must only cost the old speed
        log.debug("cffi type warm-up skipped (%s: %s); types parse lazily", type(e).__name__, e)
        return 0


def _parse_all(ffi: Any, types: list[str]) -> int:
    """What `FFI._typeof_locked` does per string, from one parse of ``void f_i(<type_i>);`` lines."""
    import pycparser  # type: ignore[import-untyped]  # cffi's parser, a dependency of cffi

    parser = ffi._parser
    with ffi._lock:
        missing = [t for t in dict.fromkeys(types) if t not in ffi._parsed_types]
        if not missing:
            return 0
        source = "\n".join(f"void __onyxia_warm_{i}(\n{t}\n);" for i, t in enumerate(missing))
        ast, macros, _ = parser._parse(source)
        if macros:
            return 0
        declarations = ast.ext[-len(missing) :]
        found = {}
        for i, (cdecl, decl) in enumerate(zip(missing, declarations, strict=True)):
            if decl.name != f"__onyxia_warm_{i}":
                return 0
            node = decl.type.args.params[0]
            if isinstance(node, pycparser.c_ast.ID):
                return 0  # an unknown identifier: let cffi raise its own error when it is used
            tp = parser._get_type_and_quals(node.type)[0]
            is_function = tp.is_raw_function
            if is_function:
                tp = tp.as_function_pointer()
            found[cdecl] = (ffi._get_cached_btype(tp), is_function)
        ffi._parsed_types.update(found)
    return len(found)
