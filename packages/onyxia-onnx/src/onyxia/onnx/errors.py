"""The error types this package raises.

They subclass `ModelLoadError` so the CLI prints them like any other load failure (no traceback);
separate classes let callers and tests tell a bad ONNX file from other load problems, and a model
that parses but breaks its operators' schemas from one that does not parse.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from onyxia.core.errors import ModelLoadError

__all__ = ["ModelValidationError", "OnnxError"]


class OnnxError(ModelLoadError):
    """An ONNX file Onyxia cannot read, or an IR graph that cannot be written back as ONNX.

    Messages start with the file (or graph) and name the tensor, node or attribute at fault.
    """


class ModelValidationError(OnnxError):
    """A model that breaks its operators' schemas or Onyxia's limits; `problems` lists every one found.

    Each problem names the node (and op) or the tensor at fault; the message starts with the file.
    """

    def __init__(self, path: Path, problems: Sequence[str]) -> None:
        self.path = path
        self.problems = list(problems)
        if len(self.problems) == 1:
            message = f"{path}: {self.problems[0]}"
        else:
            listed = "\n".join(f"  - {p}" for p in self.problems)
            message = f"{path}: {len(self.problems)} problems found validating the model:\n{listed}"
        super().__init__(message)
