"""One error hierarchy for every layer.

The CLI prints any `OnyxiaError` without a traceback, so every message must say where (file, node,
input), what was found, and what was expected. Third-party errors are re-raised as one of these
`from e` at the boundary where they happen.
"""

from __future__ import annotations

__all__ = [
    "DeviceError",
    "InputError",
    "ModelLoadError",
    "OnyxiaError",
    "PlanningError",
    "ShaderError",
    "ShapeInferenceError",
    "SymbolicError",
    "UnsupportedOpError",
]


class OnyxiaError(Exception):
    """Base of every error Onyxia raises on purpose.

    `compiler_pass` says which compiler pass raised it and what ran before: for developers (``onyxia
    --debug 1``, compile dumps), never part of the message, which speaks of the model."""

    compiler_pass: str | None = None


class ModelLoadError(OnyxiaError):
    """A model file could not be read or is not a model Onyxia can represent."""


class UnsupportedOpError(OnyxiaError):
    """One or more nodes have no operator, or use an attribute value that is not implemented."""


class ShapeInferenceError(OnyxiaError):
    """A node's output shape or dtype cannot be derived from its inputs."""


class SymbolicError(OnyxiaError):
    """A symbolic dimension string is malformed, or evaluated with a name left unbound."""


class PlanningError(OnyxiaError):
    """A node could not be turned into GPU steps."""


class ShaderError(OnyxiaError):
    """A WGSL source could not be preprocessed or compiled."""


class InputError(OnyxiaError):
    """Inputs given to a run do not match what the compiled model expects."""


class DeviceError(OnyxiaError):
    """No usable GPU adapter, or the adapter lacks something the model needs."""
