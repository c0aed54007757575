"""onyxia.onnx — ONNX files to the Onyxia IR, and IR graphs back to ONNX.

First step of load -> IR -> passes -> plan -> executor: `load_and_parse_model` turns a model file
(external data included, mapped lazily) into an `IrGraph`; `to_onnx` writes any graph back so it
can be dumped after a pass and checked against onnxruntime. Depends on onyxia.core, onnx and
numpy only; it must not import wgpu or onyxia.runtime, onyxia.operators or onyxia.compiler.
"""

from onyxia.onnx._version import __version__ as __version__
from onyxia.onnx.errors import ModelValidationError, OnnxError
from onyxia.onnx.export import to_onnx
from onyxia.onnx.loader import load_and_parse_model

__all__ = ["ModelValidationError", "OnnxError", "load_and_parse_model", "to_onnx"]
