"""onnxruntime's exception classes and message form, so code that catches them keeps working.

onnxruntime raises the classes of `onnxruntime.capi.onnxruntime_pybind11_state` (all direct `Exception`
subclasses) with a first line ``[ONNXRuntimeError] : <code> : <NAME> : <what happened>``; packages catch
them by class and sometimes match the text. `ort_error` builds the same first line for the same mistake
(worded as onnxruntime 1.32 words it; tests/ort/test_ort_errors.py runs both on each case) and puts
Onyxia's own explanation on the lines after it. The Onyxia exception behind it, when there is one, is
the new exception's ``__cause__`` (raise ... from), so a package that wraps the error keeps the detail.
"""

from __future__ import annotations

__all__ = [
    "DeviceReset",
    "EPFail",
    "EngineError",
    "Fail",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "ModelLoadCanceled",
    "ModelLoaded",
    "ModelRequiresCompilation",
    "NoModel",
    "NoSuchFile",
    "NotFound",
    "NotImplemented",
    "RuntimeException",
    "ort_error",
]


class Fail(Exception):
    """FAIL (1): a failure onnxruntime has no closer code for."""


class InvalidArgument(Exception):
    """INVALID_ARGUMENT (2): a feed or name the model does not accept."""


class NoSuchFile(Exception):
    """NO_SUCHFILE (3): the model path does not exist."""


class NoModel(Exception):
    """NO_MODEL (4)."""


class EngineError(Exception):
    """ENGINE_ERROR (5)."""


class RuntimeException(Exception):
    """RUNTIME_EXCEPTION (6): a run failed while executing."""


class InvalidProtobuf(Exception):
    """INVALID_PROTOBUF (7): the file or bytes are not an ONNX protobuf."""


class ModelLoaded(Exception):
    """MODEL_LOADED (8)."""


class NotImplemented(Exception):  # noqa: A001 - onnxruntime's own class name
    """NOT_IMPLEMENTED (9): an operator or feature the engine has no implementation of."""


class InvalidGraph(Exception):
    """INVALID_GRAPH (10): the model fails validation against its operators' schemas."""


class EPFail(Exception):
    """EP_FAIL (11): the execution provider failed (Onyxia: the WebGPU device)."""


class ModelLoadCanceled(Exception):
    """MODEL_LOAD_CANCELED (12)."""


class ModelRequiresCompilation(Exception):
    """MODEL_REQUIRES_COMPILATION (13)."""


class NotFound(Exception):
    """NOT_FOUND (14)."""


class DeviceReset(Exception):
    """A device reset (onnxruntime raises it for a lost GPU device)."""


_CODES: dict[type[Exception], tuple[int, str]] = {
    Fail: (1, "FAIL"),
    InvalidArgument: (2, "INVALID_ARGUMENT"),
    NoSuchFile: (3, "NO_SUCHFILE"),
    NoModel: (4, "NO_MODEL"),
    EngineError: (5, "ENGINE_ERROR"),
    RuntimeException: (6, "RUNTIME_EXCEPTION"),
    InvalidProtobuf: (7, "INVALID_PROTOBUF"),
    ModelLoaded: (8, "MODEL_LOADED"),
    NotImplemented: (9, "NOT_IMPLEMENTED"),
    InvalidGraph: (10, "INVALID_GRAPH"),
    EPFail: (11, "EP_FAIL"),
    ModelLoadCanceled: (12, "MODEL_LOAD_CANCELED"),
    ModelRequiresCompilation: (13, "MODEL_REQUIRES_COMPILATION"),
    NotFound: (14, "NOT_FOUND"),
    DeviceReset: (1, "FAIL"),
}


def ort_error(cls: type[Exception], text: str, detail: str | None = None) -> Exception:
    """`cls` with onnxruntime's status prefix before `text`; `detail` (Onyxia's words) on the next line."""
    code, name = _CODES[cls]
    message = f"[ONNXRuntimeError] : {code} : {name} : {text}"
    return cls(f"{message}\n{detail}" if detail else message)
