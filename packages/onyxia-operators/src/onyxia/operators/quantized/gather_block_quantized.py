"""com.microsoft GatherBlockQuantized (4-bit): Gather rows of block-quantized data, dequantised.

The onnxruntime-genai int4 builder emits it for a tied embedding: the LM head's MatMulNBits
weight, Reshaped to [vocab, hidden / 2] uint8, gathered by token id (gather_axis 0, quantize_axis 1,
block_size 32). As in onnxruntime: uint8 data packs two values per byte along the last axis
(which must be the quantize axis, with gather_axis 0) and defaults to zero point 8; INT4/UINT4
data is indexed by its logical shape and defaults to zero point 0. An out-of-range index gives a
row of zeros, as onnxruntime's CPU kernel does. The output dtype is the scales' dtype.

A table over the storage-binding limit is gathered in row ranges, one dispatch each (`split_rows` with
the data's, the scales' and the zero points' row sizes, so every range is within the limit and aligned
in all three): Qwen2.5-0.5B's tied 151936 x 896 table (the genai builder's Reshape of the lm head's 4-bit
weight, folded into a lazy initializer and bound packed) is 68 MB; a table only known at run time is bound
at one byte per u32, four times that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from onyxia.core import (
    BufferRange,
    BufferRef,
    Chunk,
    DataType,
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    TensorType,
    ceil_div,
    load_wgsl,
    max_binding_bytes,
)
from onyxia.core.bindings import split_rows
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.quantized.matmul_nbits import unsupported
from onyxia.operators.quantized.packing import bind_packed
from onyxia.operators.typesets import FLOATS

__all__ = ["GatherBlockQuantizedOp"]

_DATA, _INDICES, _SCALES, _ZERO_POINTS = range(4)
_PACKED = frozenset({DataType.UINT8, DataType.INT4, DataType.UINT4})


@dataclass(frozen=True)
class _Axes:
    data: tuple[int, ...]  # logical dims (uint8's packed last axis doubled)
    gather: int
    quantize: int
    block_size: int

    @property
    def blocks(self) -> int:
        return -(-self.data[self.quantize] // self.block_size)


def _axes(ctx: NodeCtx) -> _Axes:
    bits = ctx.attr_int("bits", 4)
    if bits != 4:
        raise unsupported(ctx, f"attribute 'bits' = {bits} is not implemented (supported: 4)")
    dtype = ctx.input_dtype(_DATA)
    if dtype not in _PACKED:
        raise unsupported(ctx, f"input 0 (data) dtype {dtype.name.lower()} is not implemented (uint8, int4, uint4)")
    dims = list(ctx.require_static(_DATA))
    rank = len(dims)
    gather = ctx.normalize_axis(ctx.attr_int("gather_axis", 0), rank)
    quantize = ctx.normalize_axis(ctx.attr_int("quantize_axis", 1), rank)
    block_size = ctx.attr_int("block_size", 128)
    if block_size < 16 or block_size & (block_size - 1):
        raise ctx.error(f"attribute 'block_size' = {block_size}; expected a power of two >= 16")
    if dtype == DataType.UINT8:
        if gather != 0 or quantize != rank - 1:
            raise ctx.error(
                f"uint8 data needs gather_axis 0 and quantize_axis {rank - 1} (the packed last axis); "
                f"found {gather} and {quantize}"
            )
        dims[-1] *= 2
    axes = _Axes(tuple(dims), gather, quantize, block_size)
    _check_scales(ctx, axes, dtype)
    return axes


def _check_scales(ctx: NodeCtx, axes: _Axes, dtype: DataType) -> None:
    if ctx.input_dtype(_SCALES) not in FLOATS:
        raise unsupported(ctx, f"input 2 (scales) dtype {ctx.input_dtype(_SCALES).name.lower()} is not implemented")
    expected = list(axes.data)
    expected[axes.quantize] = axes.blocks
    if list(ctx.input_dims(_SCALES)) != expected:
        raise ctx.error(f"input 2 (scales) has dims {list(ctx.input_dims(_SCALES))}; expected {expected}")
    if ctx.has_input(_ZERO_POINTS):
        if ctx.input_dtype(_ZERO_POINTS) != dtype:
            raise ctx.error(f"input 3 (zero_points) must have the data's dtype {dtype.name.lower()}")
        if dtype == DataType.UINT8:
            expected[-1] = (expected[-1] + 1) // 2
        if list(ctx.input_dims(_ZERO_POINTS)) != expected:
            raise ctx.error(f"input 3 (zero_points) has dims {list(ctx.input_dims(_ZERO_POINTS))}; expected {expected}")


@dataclass(frozen=True)
class GatherBlockQuantizedOp(OperatorBase):
    name: str = "GatherBlockQuantized"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        axes = _axes(ctx)
        data = axes.data
        dims = [*data[: axes.gather], *ctx.input_dims(_INDICES), *data[axes.gather + 1 :]]
        return [TensorType(ctx.input_dtype(_SCALES), shape_of(dims))]

    def plan(self, ctx: PlanCtx) -> None:
        axes = _axes(ctx)
        dtype = ctx.input_dtype(_DATA)
        data = bind_packed(ctx, _DATA)
        reads = [data.buffer, ctx.input(_INDICES), ctx.input(_SCALES)]
        defs: dict[str, object] = {**type_defs(S_T=ctx.input_dtype(_SCALES)), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        defs["DEFAULT_ZP"] = "8.0" if dtype == DataType.UINT8 else "0.0"
        if data.widened:
            defs["DATA_WIDENED"] = True
        if dtype == DataType.INT4:
            defs["SIGNED"] = True
        zp_widened = False
        if ctx.has_input(_ZERO_POINTS):
            zero_points = bind_packed(ctx, _ZERO_POINTS)
            reads.append(zero_points.buffer)
            defs["ZP"] = True
            zp_widened = zero_points.widened
            if zp_widened:
                defs["ZP_WIDENED"] = True
        defs["Y_BINDING"] = len(reads)
        n_out = dims_product(ctx.output_dims(0))
        if n_out == 0:
            return  # nothing to gather (and a literal `% 0u` would not compile)
        blocks = axes.blocks
        zrow = blocks + blocks % 2 if dtype == DataType.UINT8 else blocks
        dims = {
            "N_OUT": n_out,
            "GN": dims_product(ctx.input_dims(_INDICES)),
            "G": axes.data[axes.gather],
            "GB": dims_product(axes.data[axes.gather + 1 :]),
            "QD": axes.data[axes.quantize],
            "QN": dims_product(axes.data[axes.quantize + 1 :]),
            "NBQ": blocks,
            "BLOCK_SIZE": axes.block_size,
            "ZROW": zrow,
        }
        source = load_wgsl(__package__, "gather_block_quantized.wgsl")
        row_bytes = _row_bytes(ctx, axes, zrow, widened=[data.widened, zp_widened])
        for chunk in _chunks(ctx, axes, row_bytes):
            chunk_reads: list[BufferRef | BufferRange] = list(reads)
            chunk_defs, chunk_dims = defs, dims
            if chunk.size is not None and row_bytes is not None:
                for index, size in zip((0, 2, 3), row_bytes):
                    chunk_reads[index] = chunk.range_of(reads[index], size)
                chunk_defs, chunk_dims = (
                    {**defs, "CHUNKED": True},
                    {**dims, "FIRST_ROW": chunk.first_row, "ROWS": chunk.rows},
                )
            shader = ctx.compile_shader("GatherBlockQuantized", source, chunk_defs, chunk_dims)
            ctx.dispatch(shader, chunk_reads, [ctx.output(0)], ceil_div(n_out, WORKGROUP_SIZE))


def _row_bytes(ctx: PlanCtx, axes: _Axes, zrow: int, widened: list[bool]) -> list[int] | None:
    """Bytes per gathered row of the bound data, scales (and zero points), or None when rows are not
    whole bytes apart (only gather_axis 0 with blocks along a later axis is split)."""
    if axes.gather != 0 or axes.quantize == 0:
        return None
    per_row = math.prod(axes.data[1:])
    after = math.prod(axes.data[axes.quantize + 1 :])
    scales = per_row // (axes.data[axes.quantize] * after) * axes.blocks * after
    nibbles = [per_row]
    if ctx.has_input(_ZERO_POINTS):
        nibbles.append(scales // axes.blocks * zrow)
    if any(n % 2 for n in nibbles):
        return None
    packed = [n // 2 * (4 if wide else 1) for n, wide in zip(nibbles, widened)]
    return [packed[0], scales * ctx.input_dtype(_SCALES).gpu_numpy.itemsize, *packed[1:]]


def _chunks(ctx: PlanCtx, axes: _Axes, row_bytes: list[int] | None) -> list[Chunk]:
    whole = [Chunk(0, None, 0, axes.data[0])]
    if row_bytes is None:
        return whole
    where = f"node '{ctx.node.name}' ({ctx.node.op_type}): data, scales and zero points"
    return split_rows(axes.data[0], row_bytes, max_binding_bytes(), where)
