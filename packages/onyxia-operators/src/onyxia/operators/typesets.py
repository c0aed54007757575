"""Named dtype sets for family rows (which dtypes a shader expression is valid WGSL for).

float64 sits among FLOATS because it is stored as f32 (`DataType.is_demoted`): a float kernel computes
it as it computes float32, and the plan reports the demotion. uint64 sits among the unsigned ints
because it is stored as u32 (values below 2^32, checked at upload), as int64 sits among the signed
ones as i32: an op computes it as it computes uint32, and where its result could leave 32 bits the op
uses the checked form (`onyxia.operators.int64_checks`) or takes `WRAPPING_NUMERIC`, which leaves
uint64 out (refused at compile time rather than wrapped at 2^32 where onnxruntime wraps at 2^64)."""

from __future__ import annotations

from onyxia.core import DataType, NodeCtx, UnsupportedOpError

__all__ = ["ALL_GPU", "BOOL", "FLOATS", "INTS", "NUMERIC", "SIGNED", "WRAPPING_NUMERIC", "require_dtype"]

FLOATS = frozenset({DataType.FLOAT, DataType.FLOAT16, DataType.DOUBLE})
SIGNED_INTS = frozenset({DataType.INT32, DataType.INT64, DataType.INT8, DataType.INT16})
UNSIGNED_INTS = frozenset({DataType.UINT32, DataType.UINT8, DataType.UINT16, DataType.UINT64})
INTS = SIGNED_INTS | UNSIGNED_INTS
SIGNED = FLOATS | SIGNED_INTS
NUMERIC = FLOATS | INTS
WRAPPING_NUMERIC = NUMERIC - {DataType.UINT64}  # rows whose sums/products have no checked uint64 form
BOOL = frozenset({DataType.BOOL})
ALL_GPU = NUMERIC | BOOL


def require_dtype(ctx: NodeCtx, dtype: DataType, allowed: frozenset[DataType], what: str = "input") -> None:
    """Refuse, at compile time, a dtype the op's shader expression has no WGSL form for."""
    if dtype not in allowed:
        names = ", ".join(sorted(d.name.lower() for d in allowed))
        node = ctx.node
        raise UnsupportedOpError(
            f"node '{node.name}' ({node.op_type}): {what} dtype {dtype.name.lower()} is not implemented on the GPU "
            f"(supported: {names})"
        )
