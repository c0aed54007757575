"""onyxia.operators — ONNX and com.microsoft operators, their WGSL shaders, optional passes.

Sits between the IR (onyxia.core) and planning: each operator infers shapes, folds, and emits GPU
steps through the ctx objects. It must not import onyxia.runtime, onnx or wgpu.
"""

from onyxia.operators._version import __version__ as __version__
from onyxia.operators.passes import default_passes
from onyxia.operators.registry import core_operator_registry, register_builtin

__all__ = ["core_operator_registry", "default_passes", "register_builtin"]
