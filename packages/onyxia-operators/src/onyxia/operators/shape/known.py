"""`KnownValueOp`: Constant, Shape and Size, whose outputs never depend on tensor data.

Their value is fixed by attributes (Constant) or by the input's dims (Shape, Size), so inference
computes it and folding always succeeds: neither ever becomes a GPU step. Shape of a symbolic
input folds to a *symbolic value* (an object array of ints and `SymbolicExpr`s), which is what
lets ``Shape -> Gather -> Concat -> Reshape`` chains resolve at compile time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    PlanningError,
    Static,
    TensorType,
    TensorValue,
    UnsupportedOpError,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows

__all__ = ["KNOWN", "KnownValueOp"]


@dataclass(frozen=True)
class KnownValueOp:
    value: Callable[[NodeCtx], tuple[DataType, np.ndarray]]
    name: str = "known"
    always_fold = True  # the value exists already, whatever its size: folding costs nothing

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dtype, value = self.value(ctx)
        return [TensorType(dtype, Static(tuple(int(d) for d in value.shape)))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray]:
        return [self.value(ctx)[1]]

    def plan(self, ctx: PlanCtx) -> None:
        # Unreachable while folding works: these ops always fold (`always_fold`).
        dtype, value = self.value(ctx)
        raise PlanningError(
            f"node '{ctx.node.name}' ({ctx.node.op_type}): output {dtype.short}{list(value.shape)} was not folded at "
            "compile time, and it has no GPU step"
        )


def _shape_value(ctx: NodeCtx) -> tuple[DataType, np.ndarray]:
    # Python slicing clamps negative and out-of-range start/end exactly as opset 15's Shape does.
    end = ctx.attr("end")
    dims = list(ctx.input_dims(0)[ctx.attr_int("start", 0) : None if end is None else int(end)])
    if all(isinstance(d, int) for d in dims):
        return DataType.INT64, np.array(dims, dtype=np.int64)
    return DataType.INT64, np.array(dims, dtype=object)


def _size_value(ctx: NodeCtx) -> tuple[DataType, np.ndarray]:
    count = dims_product(ctx.input_dims(0))
    return DataType.INT64, np.array(count, dtype=np.int64 if isinstance(count, int) else object)


def _tensor_form(value: Any) -> np.ndarray:
    if isinstance(value, TensorValue) and value.dtype in (DataType.UINT4, DataType.INT4):
        raise TypeError("4-bit Constant values are not supported")
    return np.asarray(value.numpy() if isinstance(value, TensorValue) else value)


_CONSTANT_FORMS: dict[str, Callable[[Any], np.ndarray]] = {
    "value": _tensor_form,
    "value_float": lambda v: np.array(v, dtype=np.float32),
    "value_floats": lambda v: np.array(v, dtype=np.float32).reshape(-1),
    "value_int": lambda v: np.array(v, dtype=np.int64),
    "value_ints": lambda v: np.array(v, dtype=np.int64).reshape(-1),
}
_UNSUPPORTED_FORMS = ("sparse_value", "value_string", "value_strings")


def _constant_value(ctx: NodeCtx) -> tuple[DataType, np.ndarray]:
    node = ctx.node
    unsupported = [k for k in _UNSUPPORTED_FORMS if k in node.attributes]
    if unsupported:
        raise UnsupportedOpError(f"node '{node.name}' (Constant): attribute '{unsupported[0]}' is not supported")
    forms = [k for k in _CONSTANT_FORMS if k in node.attributes]
    if len(forms) != 1:
        raise ctx.error(f"expected exactly one of {', '.join(_CONSTANT_FORMS)}; found {forms or 'none'}")
    try:
        array = _CONSTANT_FORMS[forms[0]](node.attributes[forms[0]])
    except TypeError as e:
        raise UnsupportedOpError(f"node '{node.name}' (Constant): attribute '{forms[0]}': {e}") from e
    return DataType.from_numpy(array.dtype), array


KNOWN: dict[str, KnownValueOp] = named_rows(
    {
        "Constant": KnownValueOp(_constant_value),
        "Shape": KnownValueOp(_shape_value),
        "Size": KnownValueOp(_size_value),
    }
)
