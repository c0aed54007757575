"""`MatMulOp`: numpy `matmul` semantics on the GPU, and com.onyxia MatMulTransB.

1-D operands are promoted (a leading 1 for `a`, a trailing 1 for `b`) and the added dim is dropped
from the result; batch dims broadcast. When `b` has no batch (the usual activation @ weight), `a`'s
batch is folded into M so the whole product is one big GEMM rather than many small ones.

MatMulTransB(a, w) is ``a @ swapaxes(w, -1, -2)`` with `w` read in place, as [N, K]: the
`FoldTransposeIntoMatMul` pass produces it from a tied lm head's ``MatMul(x, Transpose(embed))``,
whose transpose is too big to fold and would otherwise run on every step.

Three shaders serve it. A float `b` that is a compile-time weight [K, N] is planned by MatMulGroup's
(`plan_weight_products`, a group of one) in column panels, which a decode step streams linearly. A float
product by a transposed, batch-free `b` (the tied lm head) runs matmul_rows.wgsl, which walks b's rows in place,
for the M its tiles cover (`covering_tiles`: one row, or on lavapipe with subgroups every M, the rows of a batched
decode step sharing each load of b). Everything else (runtime operands, batches, integers, larger M by a
transposed `b`) runs matmul.wgsl's register blocks, which sum each output in matmul_rows.wgsl's order.

A batch-free `b` over the storage-binding limit (a 671 MB embedding used as the lm head) is split
into row ranges, one dispatch each (`PlanCtx.chunks`): ranges of K for a plain `b` [K, N], whose
partial products add up in y, and ranges of N for a transposed one, each writing its own columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    Chunk,
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
)
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.family import named_rows
from onyxia.operators.layout import broadcast_strides, type_defs
from onyxia.operators.matmul.matmul_group import plan_weight_products
from onyxia.operators.matmul.tiles import Tile
from onyxia.operators.matmul.variants import covering_tiles, labelled, planned_tiles, shared_a_defs, spread8_defs
from onyxia.operators.matmul.weights import panels_fit
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["MATMUL", "MATMUL_ONYXIA", "MatMulOp"]

_SOURCE = load_wgsl(__package__, "matmul.wgsl")
_ROWS_SOURCE = load_wgsl(__package__, "matmul_rows.wgsl")

_INT_TYPES = frozenset({DataType.INT32, DataType.INT64, DataType.UINT32})


@dataclass(frozen=True)
class _Operands:
    """The product as the shader sees it: batch dims with per-operand strides, then M x K @ K x N."""

    batch: list[SymbolicDim]
    a_strides: list[SymbolicDim]
    b_strides: list[SymbolicDim]
    m: SymbolicDim
    k: SymbolicDim
    n: SymbolicDim


@dataclass(frozen=True)
class _Part:
    """One dispatch's share of the product: K-range [k0, k0 + k) and N-range [n0, n0 + n) of b."""

    chunk: Chunk
    k: SymbolicDim
    n: SymbolicDim
    k0: int = 0
    n0: int = 0


@dataclass(frozen=True)
class MatMulOp:
    dtypes: frozenset[DataType] = FLOATS | _INT_TYPES
    trans_b: bool = False  # b is stored [..., N, K]
    name: str = "matmul"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        a, b = ctx.input_dtype(0), ctx.input_dtype(1)
        if a != b:
            raise ctx.error(f"inputs must share a dtype, found {a.name.lower()} and {b.name.lower()}")
        return [TensorType(a, shape_of(_output_dims(ctx, self.trans_b)))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        a, b = ctx.input_value(0), ctx.input_value(1)
        if a is None or b is None or a.dtype == object or b.dtype == object:
            return None
        if self.trans_b:
            b = np.swapaxes(b, -1, -2)
        if a.dtype == np.float16:  # accumulate in f32 like the shader (numpy's f16 matmul sums in f16)
            return [np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)]
        return [np.matmul(a, b)]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, self.dtypes)
        ops = _operands(ctx, self.trans_b)
        weight = _panel_weight(ctx, ops, self.trans_b)
        if weight is not None:
            k, n = weight
            plan_weight_products(ctx, ops.m, k, [n])
            return
        # the M matmul_rows.wgsl covers (1, 0, or 1 at run time for the M within its tiles) and its tiles
        rows, covered = covering_tiles("matmul_rows", ops.m) if _rows_kernel(ctx, ops, self.trans_b) else ([], 0)
        for index, part in enumerate(_parts(ctx, ops, self.trans_b)):
            if 0 in (part.n, ops.m, dims_product(ops.batch)):
                return  # an empty output (a zero K still writes zeros, so only M, N or batch count)
            for tile, share in rows:
                _dispatch_rows(ctx, ops, part, tile, share)
            if covered != 1:
                for tile, share in planned_tiles("matmul", ops.m):  # a symbolic M: each M range its tile
                    _dispatch_blocks(ctx, ops, part, index, self.trans_b, tile, share * (1 - covered))


def _dispatch_blocks(
    ctx: PlanCtx, ops: _Operands, part: _Part, index: int, trans_b: bool, tile: Tile, share: SymbolicDim
) -> None:
    """One part of the product by matmul.wgsl in `tile`; `share` (0 or 1 at run time) scales its workgroup
    count."""
    dtype = ctx.input_dtype(0)
    acc = "f32" if dtype in FLOATS else dtype.wgsl
    defs = {
        **type_defs(A_T=dtype, B_T=dtype, Y_T=dtype),
        **tile.block_defs,
        "ACC_T": acc,
        "BATCH_RANK": len(ops.batch),
    }
    if index and not trans_b:  # K-ranges after the first add their partial product to y (N-ranges write apart)
        defs["ACCUMULATE"] = True
    strides = {"B_K_STRIDE": 1, "B_N_STRIDE": ops.k} if trans_b else {"B_K_STRIDE": ops.n, "B_N_STRIDE": 1}
    dims = {
        "M": ops.m,
        "N": part.n,
        "K": part.k,
        "A_ROW": ops.k,
        "Y_ROW": ops.n,
        "A_COL0": part.k0,
        "Y_COL0": part.n0,
        **strides,
        "BATCH_DIMS": ops.batch,
        "A_BATCH_STRIDES": ops.a_strides,
        "B_BATCH_STRIDES": ops.b_strides,
    }
    groups = (
        ceil_div(part.n, tile.columns_per_workgroup) * share,
        ceil_div(ops.m, tile.rows_per_workgroup),
        dims_product(ops.batch),
    )
    shader = ctx.compile_shader(labelled("matmul/matmul"), _SOURCE, defs, dims)
    ctx.dispatch(shader, [ctx.input(0), ctx.input_chunk(1, part.chunk)], [ctx.output(0)], groups)


def _dispatch_rows(ctx: PlanCtx, ops: _Operands, part: _Part, tile: Tile, share: SymbolicDim) -> None:
    """One part (a range of b's rows) of a MatMulTransB by matmul_rows.wgsl in `tile`; `share` (0 or 1 at run
    time) scales its workgroup count."""
    defs = {
        **type_defs(T=ctx.input_dtype(0)),
        "ROWS": tile.rows,
        "ROW_ITEMS": " ".join(str(i) for i in range(tile.rows)),
        "COLS": tile.columns,
        "COL_ITEMS": " ".join(str(c) for c in range(tile.columns)),
        "WG": tile.wg_x,
        **shared_a_defs(tile.rows),
        "CELLS": tile.rows * tile.columns,
        **spread8_defs(tile.rows),
    }
    dims = {"K4": ops.k // 4, "N": part.n, "Y_COL0": part.n0, "M": ops.m, "Y_ROW": ops.n}
    shader = ctx.compile_shader(labelled("matmul/matmul_rows"), _ROWS_SOURCE, defs, dims)
    groups = (ceil_div(part.n, tile.columns_per_workgroup) * share, 1, ceil_div(ops.m, tile.rows))
    ctx.dispatch(shader, [ctx.input(0), ctx.input_chunk(1, part.chunk)], [ctx.output(0)], groups)


def _rows_kernel(ctx: PlanCtx, ops: _Operands, trans_b: bool) -> bool:
    """Whether matmul_rows.wgsl can take the product: a float, batch-free b stored [N, K] in whole vec4s."""
    k = ops.k
    return trans_b and ctx.input_dtype(0) in FLOATS and ops.batch == [1] and isinstance(k, int) and k > 0 and k % 4 == 0


def _panel_weight(ctx: PlanCtx, ops: _Operands, trans_b: bool) -> tuple[int, int] | None:
    """(K, N) when b is a compile-time float weight [K, N] (leading 1s allowed) that MatMulGroup's shader reads
    as column panels: a group of one, so the GroupMatMuls pass changes no bit of the output. Else None."""
    k, n = ops.k, ops.n
    if trans_b or ctx.input_dtype(0) not in FLOATS or ctx.input_rank(1) < 2 or ops.batch != [1]:
        return None
    if not isinstance(k, int) or not isinstance(n, int) or not panels_fit(ctx, 1, k, n):
        return None
    return k, n


def _parts(ctx: PlanCtx, ops: _Operands, trans_b: bool) -> list[_Part]:
    """One part for a b that fits a binding; else one per row range of a batch-free, static b."""
    rows, row_len = (ops.n, ops.k) if trans_b else (ops.k, ops.n)
    whole = [_Part(Chunk(0, None, 0, rows), ops.k, ops.n)]
    if ops.batch != [1] or not isinstance(row_len, int) or not isinstance(rows, int) or rows * row_len == 0:
        return whole  # only a weight-like b gets split; anything else is left to the runtime's check
    chunks = ctx.chunks(1, row_len * ctx.input_dtype(1).gpu_numpy.itemsize)
    if trans_b:
        return [_Part(c, ops.k, c.rows, n0=c.first_row) for c in chunks]
    return [_Part(c, c.rows, ops.n, k0=c.first_row) for c in chunks]


def _promoted(ctx: NodeCtx, trans_b: bool) -> tuple[list[SymbolicDim], list[SymbolicDim]]:
    """Both operands at rank >= 2, b in its logical [..., K, N] order."""
    a, b = list(ctx.input_dims(0)), list(ctx.input_dims(1))
    if not a or not b:
        raise ctx.error("MatMul operands must have rank >= 1 (a scalar operand is Mul, not MatMul)")
    if trans_b:
        if len(b) < 2:
            raise ctx.error(f"input 1 must have rank >= 2 (stored as [..., N, K]), found rank {len(b)}")
        b = [*b[:-2], b[-1], b[-2]]
    return ([1, *a] if len(a) == 1 else a), ([*b, 1] if len(b) == 1 else b)


def _output_dims(ctx: InferenceCtx, trans_b: bool) -> list[SymbolicDim]:
    a, b = _promoted(ctx, trans_b)
    ka, kb = a[-1], b[-2]
    if ka != kb:
        if isinstance(ka, int) and isinstance(kb, int):
            raise ctx.error(f"input 1 dim {-1 if trans_b else -2} ({kb}) must equal input 0 dim -1 ({ka})")
        ctx.constraints.append((ka, kb, f"node '{ctx.node.name}' ({ctx.node.op_type}) inner dims"))
    batch = list(ctx.broadcast(a[:-2], b[:-2]).dims)
    rows = [a[-2]] if ctx.input_rank(0) > 1 else []
    cols = [b[-1]] if ctx.input_rank(1) > 1 else []
    return batch + rows + cols


def _operands(ctx: PlanCtx, trans_b: bool) -> _Operands:
    a, b = _promoted(ctx, trans_b)
    m, k, n = a[-2], a[-1], b[-1]
    a_batch, b_batch = a[:-2], b[:-2]
    if all(d == 1 for d in b_batch):  # a weight-like `b`: a's batch rows are just more rows of M
        return _Operands([1], [0], [0], dims_product([*a_batch, m]), k, n)
    batch = list(ctx.broadcast(a_batch, b_batch).dims)
    a_strides = [s * m * k for s in broadcast_strides(a_batch, batch)]
    b_strides = [s * k * n for s in broadcast_strides(b_batch, batch)]
    return _Operands(batch, a_strides, b_strides, m, k, n)


MATMUL: dict[str, MatMulOp] = named_rows({"MatMul": MatMulOp()})
MATMUL_ONYXIA: dict[str, MatMulOp] = named_rows({"MatMulTransB": MatMulOp(trans_b=True)})  # com.onyxia
