"""8- and 16-bit integers live widened in 32 bits on the GPU: every result written in such a type is
narrowed back to its declared width, so the stored value is exactly the value ONNX means.

WGSL has no 8/16-bit integers, so uint8/uint16 are stored as u32 and int8/int16 as i32 (`DataType.wgsl`).
An expression computes in those 32 bits: uint8 250 + 10 is 260, ``~x`` of uint8 5 is 0xFFFFFFFA. Reading
the buffer back wraps (numpy's ``astype``), but a consumer on the GPU reads the 32-bit value: ``Greater(
Add(a, b), 100)`` would see 260 where onnxruntime sees 4. So the rule: a kernel writing an 8/16-bit
integer result writes `narrowed(expr, dtype)`, the low bits (zero-extended for unsigned types,
sign-extended for signed ones), as Cast always did (int32 300 -> int8 44). The elementwise families
apply it in their rows' `expression`, so their own kernels and the fused kernel (`fused.py`) agree;
a bespoke kernel writing such a dtype must do the same.
"""

from __future__ import annotations

from onyxia.core import DataType

__all__ = ["NARROW", "narrowed"]

NARROW: dict[DataType, str] = {
    DataType.INT8: "(({e}) << 24u) >> 24u",  # i32: the arithmetic right shift sign-extends bit 7
    DataType.INT16: "(({e}) << 16u) >> 16u",
    DataType.UINT8: "({e}) & 0xFFu",
    DataType.UINT16: "({e}) & 0xFFFFu",
}


def narrowed(expr: str, dtype: DataType) -> str:
    """`expr` (a value of `dtype`'s 32-bit storage type) cut to `dtype`'s width; unchanged for other dtypes."""
    return NARROW[dtype].format(e=expr) if dtype in NARROW else expr
