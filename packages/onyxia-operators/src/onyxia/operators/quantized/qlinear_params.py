"""What the QOperator-format ops (QLinearMatMul, QLinearConv, QGemm, ConvInteger, com.microsoft QLinear*) check
alike: 8-bit operands, zero points of their operand's dtype, float scales, and which elements a scale or zero
point applies to. Errors name the node, the input and what was expected (`NodeCtx.error`; a form that the spec
allows but no kernel here reads is an `UnsupportedOpError`).
"""

from __future__ import annotations

from onyxia.core import DataType, NodeCtx, SymbolicDim, UnsupportedOpError
from onyxia.core.shapes import dims_product
from onyxia.operators.quantized.linear_quant import QUANTIZED_RANGE
from onyxia.operators.typesets import FLOATS

__all__ = ["BYTES", "byte_operand", "range_defs", "scale_input", "same_dtype", "one_element", "vector_of"]

BYTES = frozenset({DataType.UINT8, DataType.INT8})


def byte_operand(ctx: NodeCtx, i: int, what: str) -> DataType:
    """Input `i`'s dtype, which must be uint8 or int8."""
    dtype = ctx.input_dtype(i)
    if dtype not in BYTES:
        raise ctx.error(f"input {i} ({what}) has dtype {dtype.name.lower()}; expected uint8 or int8")
    return dtype


def same_dtype(ctx: NodeCtx, i: int, like: int, what: str) -> None:
    """A zero point (input `i`) has the dtype of the operand (input `like`) it offsets."""
    if ctx.has_input(i) and ctx.input_dtype(i) != ctx.input_dtype(like):
        found, expected = ctx.input_dtype(i).name.lower(), ctx.input_dtype(like).name.lower()
        raise ctx.error(f"input {i} ({what}) has dtype {found}; expected {expected}, the dtype of input {like}")


def scale_input(ctx: NodeCtx, i: int, what: str) -> None:
    if ctx.input_dtype(i) not in FLOATS:
        raise ctx.error(f"input {i} ({what}) has dtype {ctx.input_dtype(i).name.lower()}; expected float or float16")


def one_element(ctx: NodeCtx, i: int, what: str) -> None:
    """Input `i` (a per-tensor scale or zero point) holds one element."""
    if ctx.has_input(i) and dims_product(ctx.input_dims(i)) != 1:
        raise UnsupportedOpError(
            f"node '{ctx.node.name}' ({ctx.node.op_type}): input {i} ({what}) has dims {list(ctx.input_dims(i))}; "
            "expected one element (per tensor)"
        )


def vector_of(
    ctx: NodeCtx, i: int, n: SymbolicDim, what: str, forms: str, batch: list[SymbolicDim] | None = None
) -> bool:
    """Whether input `i` holds one element (False) or `n` elements along one axis of dims `forms` allows
    (True: "column" is [..1, n], or [*batch, 1, n] with `batch`, "row" is [..1, n, 1], "channel" is [n]);
    anything else is refused."""
    if not ctx.has_input(i):
        return False
    dims = list(ctx.input_dims(i))
    if dims_product(dims) == 1:
        return False
    lead = {"column": dims[:-1], "row": dims[:-2], "channel": dims[:-1] or [1]}[forms]
    tail = {"column": dims[-1:], "row": dims[-2:], "channel": dims}[forms]
    expected = {"column": [n], "row": [n, 1], "channel": [n]}[forms]
    if tail == expected and all(d == 1 for d in lead) and (forms != "channel" or len(dims) == 1):
        return True
    if batch and dims == [*batch, 1, n]:
        return True
    shape = {
        "column": f"[{n}] (leading 1s allowed)" + (f" or {[*batch, 1, n]}" if batch else ""),
        "row": f"[{n}, 1] (leading 1s allowed)",
        "channel": f"[{n}]",
    }
    raise UnsupportedOpError(
        f"node '{ctx.node.name}' ({ctx.node.op_type}): input {i} ({what}) has dims {dims}; expected one element "
        f"or one per {forms}: {shape[forms]}"
    )


def range_defs(dtype: DataType) -> dict[str, object]:
    """The quantized output's range as i32 literals (LO, HI) of onyxia::requant's `requantize`."""
    lo, hi = QUANTIZED_RANGE[dtype]
    return {"LO": f"{lo}i", "HI": f"{hi}i"}
