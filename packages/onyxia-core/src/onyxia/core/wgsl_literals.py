"""Python numbers as WGSL source text: the one place a value becomes a shader literal.

Operators specialise shaders by pasting attribute values (LeakyRelu's alpha, an epsilon, Clip's
bounds, a Pad value) and static dims into the source. WGSL makes that easy to get wrong: it has no
``inf`` or ``nan`` literal, a literal outside its type's range (``1e39f``, ``f16(1e38)``,
``4294967296u``) or ``-2147483648i`` (the minus applies to an out-of-range ``2147483648i``) fails
at shader creation, which is at load, long after ``onyxia validate`` said yes. So every such value
goes through `wgsl_literal` (or `wgsl_dim` for dims), which either returns text naga accepts with
the exact value the host would compute with, or raises a `PlanningError` naming the value's origin
while the model is compiled.
"""

from __future__ import annotations

import warnings

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import PlanningError

__all__ = ["U32_MAX", "wgsl_dim", "wgsl_literal"]

U32_MAX = 2**32 - 1
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def wgsl_literal(dtype: DataType, value: object, where: str = "a shader constant") -> str:
    """`value` as a WGSL expression of `dtype`'s GPU storage type (`DataType.wgsl`).

    Floats are rounded to the dtype first (f32, or f16 with IEEE overflow to infinity, as
    onnxruntime's float16 conversion does), then written with the shortest digits that round-trip
    (``0.1f``, ``1e+38f``, ``0.1h``). Infinities and NaN, which WGSL cannot spell, become f32 bit
    patterns (``bitcast<f32>(0x7f800000u)``; f16 converts it, naga having no 16-bit bitcast).
    Integers must fit the storage type (int64 is stored as i32); `where` names the value's origin
    in the `PlanningError` otherwise ("node 'n' (Clip): input 1"), as it does for a value that is
    no number (`value` is typed `object` because attributes and folded inputs arrive untyped).
    """
    if dtype == DataType.BOOL:
        return "1u" if bool(value) else "0u"
    if dtype.is_float:
        return _float_literal(dtype, value, where)
    if not dtype.has_gpu_type:
        raise PlanningError(f"{where}: {dtype.name.lower()} has no WGSL storage type for the value {value!r}")
    return _int_literal(dtype.wgsl, value, f"{where} ({dtype.name.lower()}, stored as {dtype.wgsl})")


def wgsl_dim(value: int, where: str) -> str:
    """A static dim (or a signed offset passed beside dims) as a u32 literal.

    Kernels index with u32, so a dim above 2^32 - 1 cannot be represented: refused here, at compile
    time, naming `where`. Negative offsets (pads, steps) travel as i32 bit patterns that shaders read
    back with ``bitcast<i32>``."""
    if value >= 0:
        if value > U32_MAX:
            raise PlanningError(
                f"{where} = {value} does not fit the kernels' 32-bit indices (at most {U32_MAX}); "
                "the tensor is too large for a WebGPU buffer"
            )
        return f"{value}u"
    return f"bitcast<u32>({_int_literal('i32', value, where)})"


def _float_literal(dtype: DataType, value: object, where: str) -> str:
    if not dtype.has_gpu_type:
        raise PlanningError(f"{where}: {dtype.name.lower()} has no WGSL storage type for the value {value!r}")
    if not isinstance(value, (int, float, np.generic)):
        raise PlanningError(f"{where}: expected a number, found {value!r}")
    try:
        number = float(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError, OverflowError) as e:
        raise PlanningError(f"{where}: expected a number, found {value!r}") from e
    half = dtype.wgsl == "f16"
    with warnings.catch_warnings():  # overflow to inf is the intended IEEE rounding, not a mistake
        warnings.simplefilter("ignore", RuntimeWarning)
        rounded = np.float16(number) if half else np.float32(number)  # float64 is stored as f32
    if not np.isfinite(rounded):
        bits = int(np.float32(rounded).view(np.uint32))
        pattern = f"bitcast<f32>({bits:#010x}u)"
        return f"f16({pattern})" if half else pattern
    suffix = "h" if half else "f"
    text = str(rounded)  # numpy's shortest digits that round-trip in the rounded dtype ("-0.0" kept)
    return f"{text}{suffix}" if any(c in text for c in ".e") else f"{text}.0{suffix}"


def _int_literal(wgsl: str, value: object, where: str) -> str:
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise PlanningError(f"{where}: expected an integer, found {value!r}")
    try:
        if not isinstance(value, (int, float, np.generic)):
            raise TypeError(type(value).__name__)
        number = int(np.asarray(value).item())
    except (TypeError, ValueError, OverflowError) as e:
        raise PlanningError(f"{where}: expected an integer, found {value!r}") from e
    lo, hi = (0, U32_MAX) if wgsl == "u32" else (_I32_MIN, _I32_MAX)
    if not lo <= number <= hi:
        raise PlanningError(f"{where}: {number} is out of {wgsl}'s range [{lo}, {hi}]")
    if wgsl == "u32":
        return f"{number}u"
    return f"{number}i" if number > _I32_MIN else f"i32({number})"  # -2147483648i would negate 2147483648i
