"""The one error type this package raises.

It subclasses `ModelLoadError` so the CLI prints it like any other load failure (no traceback);
a separate class lets callers and tests tell a bad ONNX file from other load problems.
"""

from __future__ import annotations

from onyxia.core.errors import ModelLoadError

__all__ = ["OnnxError"]


class OnnxError(ModelLoadError):
    """An ONNX file Onyxia cannot read, or an IR graph that cannot be written back as ONNX.

    Messages start with the file (or graph) and name the tensor, node or attribute at fault.
    """
