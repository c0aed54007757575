"""A session's model source, checked and compiled, with onnxruntime's errors for what cannot load.

onnxruntime names a missing path NO_SUCHFILE, anything that is not an ONNX protobuf (a directory,
garbage, truncated bytes) INVALID_PROTOBUF, a model failing its checks INVALID_GRAPH, and an operator
it has no kernel for NOT_IMPLEMENTED; the first line of each is worded as onnxruntime 1.32 words it
(tests/ort/test_ort_errors.py compares them), Onyxia's error follows it and is the `__cause__`.
"""

from __future__ import annotations

import os
from pathlib import Path

from onyxia.core.errors import DeviceError, OnyxiaError, UnsupportedOpError
from onyxia.onnx import ModelValidationError
from onyxia.ort.compiling import CompiledSession, UnreadableModel, compile_plan
from onyxia.ort.errors import EPFail, Fail, InvalidGraph, InvalidProtobuf, NoSuchFile, NotImplemented, ort_error
from onyxia.ort.options import SessionOptions
from onyxia.runtime import Runtime

__all__ = ["model_source", "load_compiled"]


def model_source(path_or_bytes: object) -> Path | bytes:
    """A path (str or os.PathLike) or the model's bytes; anything else is onnxruntime's TypeError."""
    if isinstance(path_or_bytes, (str, os.PathLike)):
        return Path(os.fspath(path_or_bytes))
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes)
    raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")


def load_compiled(source: Path | bytes, options: SessionOptions, runtime: Runtime) -> CompiledSession:
    where = f"Load model from {source} failed:" if isinstance(source, Path) else ""
    if isinstance(source, Path):
        if not source.exists():
            raise ort_error(NoSuchFile, f"{where}Load model {source} failed. File doesn't exist")
        if not source.is_file():
            raise ort_error(InvalidProtobuf, f"{where}Protobuf parsing failed.", f"{source} is not a file")
    try:
        return compile_plan(
            source,
            options.free_dims_by_name,
            runtime,
            options.free_dims_by_denotation,
            options.initializers,
            options.external_files,
        )
    except UnreadableModel as e:
        text = f"{where}Protobuf parsing failed." if where else "Failed to load model because protobuf parsing failed."
        raise ort_error(InvalidProtobuf, text, str(e)) from e
    except ModelValidationError as e:
        raise ort_error(InvalidGraph, f"{where}This is an invalid model.", str(e)) from e
    except UnsupportedOpError as e:
        raise ort_error(NotImplemented, "Could not find an implementation for some nodes of the model", str(e)) from e
    except DeviceError as e:
        raise ort_error(EPFail, "The WebGPU device cannot run the model", str(e)) from e
    except OnyxiaError as e:
        raise ort_error(Fail, f"{where}Onyxia could not compile the model", str(e)) from e
