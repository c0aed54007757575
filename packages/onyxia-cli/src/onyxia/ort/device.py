"""The one `Runtime` (WebGPU adapter and device) every `onyxia.ort` session of the process shares.

onnxruntime sessions are cheap to have side by side and their `OrtValue`s may be fed from one
session's outputs to another's inputs; on one device, that is a buffer copy on the GPU. So the first
session opens the device (the settings' backend: ``ONYXIA_BACKEND``) and later ones reuse it, which
also pays the device start-up once per process. Several `Runtime`s could coexist (each opens its own
device: twice the start-up, and no GPU-side exchange between them), so `onyxia.ort` uses one.
"""

from __future__ import annotations

import threading

from onyxia.runtime import Runtime

__all__ = ["shared_runtime"]

_lock = threading.Lock()
_runtime: Runtime | None = None


def shared_runtime() -> Runtime:
    """The process's runtime, opened on first use (thread-safe)."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = Runtime()
        return _runtime
