"""The operator protocol every ONNX (or custom) op implements.

An operator answers three questions about one node: what its outputs look like
(`infer_output_shapes`), whether they can be computed now on the host (`try_fold`), and which GPU
steps compute them (`plan`). Each gets a context object whose helpers carry the boilerplate
(attribute defaults, broadcasting, errors that name the node).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.shapes import TensorShape

if TYPE_CHECKING:
    from onyxia.core.context import FoldCtx, InferenceCtx
    from onyxia.core.plan_ctx import PlanCtx

__all__ = ["Operator", "OperatorBase", "TensorType"]


class TensorType(NamedTuple):
    dtype: DataType
    shape: TensorShape


@runtime_checkable
class Operator(Protocol):
    @property
    def name(self) -> str:
        """The op type it implements (used in errors and profiles)."""
        ...

    def infer_output_shapes(self, ctx: InferenceCtx) -> Sequence[TensorType]:
        """dtype and shape of each output (Absent for an omitted optional output)."""
        ...

    def try_fold(self, ctx: FoldCtx) -> Sequence[np.ndarray] | None:
        """Output values when computable at compile time, else None."""
        ...

    def plan(self, ctx: PlanCtx) -> None:
        """Emit the GPU steps through `ctx`."""
        ...


class OperatorBase:
    """Convenience base: no folding unless a subclass says how."""

    name = "Operator"

    def try_fold(self, ctx: FoldCtx) -> Sequence[np.ndarray] | None:
        return None
