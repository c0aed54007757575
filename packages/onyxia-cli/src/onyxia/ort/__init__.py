"""onyxia.ort — onnxruntime's Python API on Onyxia: ``import onyxia.ort as ort`` and the same code runs
on the WebGPU device.

    import onyxia.ort as ort
    session = ort.InferenceSession("model.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    (probs,) = session.run(None, {"x": x})

Names and behaviour follow onnxruntime 1.32: `InferenceSession` (a path or the model's bytes), `NodeArg`
shapes and types as it reports them, its feed rules, its exception classes and first lines
(`onyxia.ort.errors`), `SessionOptions` / `RunOptions` (every field accepted; free-dimension overrides
become static dims), `OrtValue` and `SessionIOBinding` with values that stay on the GPU between runs.
Providers: Onyxia has one, ``OnyxiaWebGPUExecutionProvider``; lists naming others warn as onnxruntime does.

Device: every session of the process shares one `onyxia.runtime.Runtime` (`device.shared_runtime`),
opened by the first session, so device values pass between sessions and the device starts once; plans
are compiled inside `onyxia.runtime.compiling_for(runtime)`, which makes the compiler pick the kernel
variants and split weights for that device's limits and adapter facts (subgroups, f16, workgroup
memory). `__version__` is the onyxia-cli distribution's version (Onyxia's, not onnxruntime's).
"""

from __future__ import annotations

from onyxia.cli._version import __version__ as __version__
from onyxia.ort.errors import (
    EPFail,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    NoSuchFile,
    NotImplemented,
    RuntimeException,
)
from onyxia.ort.io_binding import SessionIOBinding
from onyxia.ort.node_arg import ModelMetadata, NodeArg
from onyxia.ort.options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from onyxia.ort.ort_value import OrtValue
from onyxia.ort.providers import PROVIDER, get_all_providers, get_available_providers, get_device
from onyxia.ort.session import InferenceSession

IOBinding = SessionIOBinding  # onnxruntime's Python wrapper class name


def get_version_string() -> str:
    """Onyxia's version (the onyxia-cli distribution's), where onnxruntime gives its own."""
    return __version__


def get_build_info() -> str:
    return f"Onyxia Build Info: onyxia-cli {__version__}, WebGPU through wgpu-py"


def disable_telemetry_events() -> None:
    """Onyxia sends no telemetry; kept so code that calls onnxruntime's switch keeps working."""


def enable_telemetry_events() -> None:
    """Onyxia sends no telemetry."""


def set_default_logger_severity(severity: int) -> None:
    """onnxruntime's own log level; Onyxia logs through Python's `logging` (logger ``onyxia``)."""


__all__ = [
    "PROVIDER",
    "EPFail",
    "ExecutionMode",
    "ExecutionOrder",
    "Fail",
    "GraphOptimizationLevel",
    "IOBinding",
    "InferenceSession",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "ModelMetadata",
    "NoSuchFile",
    "NodeArg",
    "NotImplemented",
    "OrtValue",
    "RunOptions",
    "RuntimeException",
    "SessionIOBinding",
    "SessionOptions",
    "disable_telemetry_events",
    "enable_telemetry_events",
    "get_all_providers",
    "get_available_providers",
    "get_build_info",
    "get_device",
    "get_version_string",
    "set_default_logger_severity",
]
