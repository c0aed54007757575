"""Cast from or to int4/uint4, whose GPU form stays packed (`onyxia.core.dtypes`): one dispatch.

Reading a 4-bit input unpacks its nibble (sign-extended for int4) and then converts like any
32-bit integer (`conversion`). Writing a 4-bit output keeps the low 4 bits of the integer value, as
onnxruntime does (int32 300 -> int4 -4), after rounding a float half away from zero (its std::round:
2.5 -> 3, 7.6 -> 8 -> int4 -8); `onyxia.core.nibbles.to_4bit` folds the same on the host.
`nibble_defs` gives the other 4-bit kernels (QuantizeLinear, DequantizeLinear) the same reads.
"""

from __future__ import annotations

from onyxia.core import DataType, PlanCtx, ceil_div, load_wgsl
from onyxia.core.plan_ctx import ErrorSlotUse
from onyxia.core.shapes import dims_product
from onyxia.operators.int64_checks import checked_defs
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import FLOATS

__all__ = ["emit_cast_4bit", "nibble_defs", "value_dtype"]

_SOURCE = load_wgsl(__package__, "cast_4bit.wgsl")
_VALUE = {DataType.INT4: DataType.INT32, DataType.UINT4: DataType.UINT32}


def value_dtype(dtype: DataType) -> DataType:
    """The 32-bit type a shader holds one value of `dtype` in (int4 -> int32, uint4 -> uint32)."""
    return _VALUE.get(dtype, dtype)


def nibble_defs(prefix: str, dtype: DataType) -> dict[str, object]:
    """``{prefix}_PACKED`` and ``{prefix}_NIBBLE`` (onyxia::nibbles' reader) for a 4-bit `dtype`, else none."""
    if not dtype.is_packed:
        return {}
    return {f"{prefix}_PACKED": True, f"{prefix}_NIBBLE": "nibble_i4" if dtype is DataType.INT4 else "nibble_u4"}


def emit_cast_4bit(ctx: PlanCtx, conversion: str, errors: ErrorSlotUse | None = None) -> None:
    """Input 0 cast to output 0 where either is 4-bit; `conversion` is `cast.conversion`'s expression
    from x's 32-bit value type to a non-packed output, or with `errors` a checked one (`int64_checks`)."""
    x, y = ctx.input_dtype(0), ctx.output_tensor(0).dtype
    n = dims_product(ctx.output_dims(0))
    defs = {**type_defs(X_T=x, Y_T=y), "V_T": value_dtype(x).wgsl, "WORKGROUP_SIZE": WORKGROUP_SIZE}
    defs.update(nibble_defs("X", x))
    units = n
    if y.is_packed:
        units = ceil_div(n, 8)
        defs.update(Y_PACKED=True, BITS="u32(i32(round_half_away(f32(x))))" if x in FLOATS else "u32(x)")
    else:
        defs["EXPR"] = conversion
    defs.update(checked_defs(errors, 2))
    immediates = None if errors is None else errors.immediates
    shader = ctx.compile_shader("elementwise/cast_4bit", _SOURCE, defs, {"N": n, "UNITS": units}, immediates)
    writes = [ctx.output(0)] if errors is None else [ctx.output(0), errors.ref]
    ctx.dispatch(shader, [ctx.input(0)], writes, ceil_div(units, WORKGROUP_SIZE))
