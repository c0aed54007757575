"""`CastOp`: Cast (target from the `to` attribute) and CastLike (target from input 1's dtype).

On the GPU every dtype lives in a 32-bit (or f16) storage form, so a cast is a WGSL conversion
between storage types plus, for 8/16-bit integer targets, the wrap-around ONNX (and numpy)
give when a value does not fit (int32 300 -> int8 44). Casting float to an integer truncates
toward zero, which WGSL's conversions already do; bool is ``x != 0``. int4/uint4 stay packed on
the GPU, so a cast from or to them is its own kernel (`cast_4bit`, which also says how values are
rounded and wrapped into 4 bits) and never joins a fused elementwise chain. float64 is stored as f32
(demoted, `DataType.is_demoted`), so a cast to or from it is a float32 one on the GPU. uint64 is
stored as u32 like int64 as i32: a cast to either that could leave the 32-bit range (a negative or
float value to uint64, a float or large uint32/uint64 value to int64) is checked (`int64_checks`) and
reported at run(), never wrapped (int4 -> uint64 too, in the 4-bit kernel). float8, bfloat16 and string are rejected outright,
since Onyxia has no host form for them either (so `saturate`, which only matters for float8, is
accepted and ignored).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    TensorType,
    UnsupportedOpError,
    is_symbolic_value,
)
from onyxia.core.dtypes import PACKED_4BIT
from onyxia.core.nibbles import to_4bit
from onyxia.core.shapes import dims_product
from onyxia.operators.elementwise.cast_4bit import emit_cast_4bit, value_dtype
from onyxia.operators.elementwise.unary import emit_unary
from onyxia.operators.elementwise.widened import narrowed
from onyxia.operators.family import named_rows
from onyxia.operators.int64_checks import checked_cast
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["CAST", "CastOp", "conversion"]

_HOST_TYPES = ALL_GPU | PACKED_4BIT


def conversion(x: DataType, y: DataType) -> str:
    """The WGSL expression converting a stored `x` value (named ``x``) to `y`'s storage form."""
    if y == DataType.BOOL:
        return f"select(0u, 1u, x != {x.wgsl}(0))"
    return narrowed(f"{y.wgsl}(x)", y)


@dataclass(frozen=True)
class CastOp:
    target: Callable[[NodeCtx], DataType]
    name: str = "cast"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        _require_host_type(ctx, ctx.input_dtype(0), "input")
        return [TensorType(_require_host_type(ctx, self.target(ctx), "target"), ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        value, to = ctx.input_value(0), self.target(ctx)
        if value is None:
            return None
        if is_symbolic_value(value):  # dims are integers: an integer cast keeps the symbolic value
            return [value] if to.is_integer else None
        if to in PACKED_4BIT:  # values are logical int8/uint8 (`onyxia.core.nibbles`)
            return [to_4bit(value, to)]
        with np.errstate(invalid="ignore", over="ignore"):
            return [value.astype(to.numpy)]

    def plan(self, ctx: PlanCtx) -> None:
        x, y = ctx.input_dtype(0), ctx.output_tensor(0).dtype
        require_dtype(ctx, x, ALL_GPU | PACKED_4BIT, "input")
        require_dtype(ctx, y, ALL_GPU | PACKED_4BIT, "target")
        n = dims_product(ctx.output_dims(0))
        if n == 0:
            return
        checked = checked_cast(x, y)  # e.g. float32 -> int64, int32 -> uint64: out of range is reported
        errors = None if checked is None else ctx.error_slot()
        if x in PACKED_4BIT or y in PACKED_4BIT:
            emit_cast_4bit(ctx, checked or conversion(value_dtype(x), y), errors)
            return
        emit_unary(ctx, checked or conversion(x, y), errors)


def _to_attribute(ctx: NodeCtx) -> DataType:
    code = ctx.attr_int("to")
    try:
        return DataType(code)
    except ValueError:
        raise ctx.error(f"attribute 'to' is {code}, which is not an ONNX data type") from None


def _like_input(ctx: NodeCtx) -> DataType:
    return ctx.input_dtype(1)


def _require_host_type(ctx: NodeCtx, dtype: DataType, what: str) -> DataType:
    if dtype not in _HOST_TYPES:
        raise UnsupportedOpError(
            f"node '{ctx.node.name}' ({ctx.node.op_type}): {what} dtype {dtype.name.lower()} is not supported "
            "(Onyxia casts between float32/16/64, int4-64, uint4-64 and bool)"
        )
    return dtype


CAST: dict[str, CastOp] = named_rows({"Cast": CastOp(_to_attribute), "CastLike": CastOp(_like_input)})
