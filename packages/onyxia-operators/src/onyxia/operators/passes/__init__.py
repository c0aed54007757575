"""Rewrites the operators package ships with the ops they produce; `register_builtin` puts
`default_passes()` on the registry, and `CompilerPipeline` runs them in their stage."""

from onyxia.core import Pass
from onyxia.operators.passes.fold_transpose_into_matmul import FoldTransposeIntoMatMul

__all__ = ["FoldTransposeIntoMatMul", "default_passes"]


def default_passes() -> list[Pass]:
    """Fresh instances, in the order they run within their stage."""
    return [FoldTransposeIntoMatMul()]
