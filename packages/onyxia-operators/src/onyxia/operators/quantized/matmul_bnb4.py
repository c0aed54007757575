"""com.microsoft MatMulBnb4: A [..., K] times a bitsandbytes 4-bit weight (FP4 or NF4), as in onnx-community's
``model_bnb4.onnx`` (onnxruntime's ``MatMulBnb4Quantizer``, which transformers.js' quantize script runs).

The weight is B^T ([N, K]) flattened and cut into blocks of `block_size` consecutive elements, each with
one absmax: ``W[n, k] = table[nibble(n * K + k)] * absmax[(n * K + k) / block_size]``, two nibbles per
byte, high nibble first (onnxruntime's ``blockwise_quant_block_bnb4.h``). When K is a multiple of
block_size this is MatMulNBits' geometry ([N, K / block_size] blocks per column) with a code table
instead of ``(q - zero_point) * scale``, so the one 4-bit product kernel serves it: matmul_nbits.wgsl
with the CODEBOOK def (the table's values, bytes high nibble first) and ZP ``zero``, per block
``absmax * sum_k a_k table[q_k]`` in f32 (decode and prefill tiles, weights packed on the GPU). So do
the com.onyxia groups: q/k/v and gate/up siblings become a MatMulNBitsGroup / GatedMatMulNBits with
attribute quant_type (``group_matmul_nbits`` in `quantized.fusions`), one dispatch each.
Otherwise a flat block can straddle two columns; every run of gcd(K, block_size) elements of a column
still lies in one block, so the kernel runs at that smaller block size with absmax gathered per run
(compile-time absmax; the run must hold whole u32 words, K % 8 == 0).

onnxruntime's CPU kernel, the reference, dequantizes B to f32 and runs an SGEMM: sums differ in order
only (about 1e-7 relative). It runs float A only, reads `training_mode` and ignores it, and with
``transB = 0`` multiplies by a matrix read with the wrong stride, so that form is refused here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    BufferRef,
    DataType,
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    TensorType,
    TensorValue,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.core.wgsl_literals import wgsl_literal
from onyxia.operators.quantized.matmul_nbits import plan_products
from onyxia.operators.quantized.matmul_nbits_layout import A, Layout, Slot, unsupported

__all__ = ["CODEBOOKS", "MatMulBnb4Op", "codebook_literals"]

# quant_type -> (name, the 16 values a nibble decodes to), onnxruntime's fp4_qaunt_map / nf4_qaunt_map as f32
CODEBOOKS: dict[int, tuple[str, np.ndarray]] = {
    0: (
        "FP4",
        np.array(
            [0.0, 5.208333333e-03, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25]
            + [-0.0, -5.208333333e-03, -0.66666667, -1.0, -0.33333333, -0.5, -0.16666667, -0.25],
            np.float32,
        ),
    ),
    1: (
        "NF4",
        np.array(
            [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635]
            + [-0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725]
            + [0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941]
            + [0.7229568362236023, 1.0],
            np.float32,
        ),
    ),
}
_BLOCK_SIZES = (16, 32, 64, 128, 256)  # onnxruntime's kernels are instantiated for these
_B, _ABSMAX = 1, 2
_WORD = 8  # nibbles per u32 word: the kernel's smallest block


@dataclass(frozen=True)
class _Geometry:
    k: int
    n: int
    block_size: int  # the attribute: elements per absmax in the flat weight
    run: int  # the kernel's block size: gcd(K, block_size)
    quant_type: int


@dataclass(frozen=True)
class MatMulBnb4Op(OperatorBase):
    name: str = "MatMulBnb4"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        g = _geometry(ctx)
        dims = ctx.input_dims(A)
        return [TensorType(ctx.input_dtype(A), shape_of([*dims[:-1], g.n]))]

    def plan(self, ctx: PlanCtx) -> None:
        g = _geometry(ctx)
        layout = Layout(g.k, g.run, "zero", False, codebook_literals(ctx, g.quant_type))
        scales = None if g.run == g.block_size else [_gathered_absmax(ctx, g)]
        plan_products(ctx, layout, [Slot(_B, _ABSMAX, 3, 4, g.n)], scales=scales)


def codebook_literals(ctx: NodeCtx, quant_type: int) -> str:
    """The CODEBOOK def of matmul_nbits.wgsl: quant_type's 16 values as WGSL f32 literals."""
    if quant_type not in CODEBOOKS:
        raise ctx.error(f"attribute 'quant_type' = {quant_type}; expected 0 (FP4) or 1 (NF4)")
    name, table = CODEBOOKS[quant_type]
    where = f"node '{ctx.node.name}' ({ctx.node.op_type}): {name} table"
    return ", ".join(wgsl_literal(DataType.FLOAT, float(v), where) for v in table)


def _geometry(ctx: NodeCtx) -> _Geometry:
    """Attributes and inputs checked against each other (onnxruntime checks them only at run time)."""
    k, n, block_size = ctx.attr_int("K"), ctx.attr_int("N"), ctx.attr_int("block_size")
    quant_type = ctx.attr_int("quant_type")
    if quant_type not in CODEBOOKS:
        raise ctx.error(f"attribute 'quant_type' = {quant_type}; expected 0 (FP4) or 1 (NF4)")
    if block_size not in _BLOCK_SIZES:
        raise ctx.error(f"attribute 'block_size' = {block_size}; expected one of {', '.join(map(str, _BLOCK_SIZES))}")
    if k < 1 or n < 1:
        raise ctx.error(f"attributes K = {k} and N = {n}; expected both >= 1")
    if ctx.attr_int("transB", 1) != 1:
        raise unsupported(ctx, "attribute 'transB' = 0 is not implemented (onnxruntime's quantizer writes 1)")
    dtype = ctx.input_dtype(A)
    if dtype != DataType.FLOAT:
        raise unsupported(ctx, f"input 0 (A) dtype {dtype.name.lower()} is not implemented (supported: float)")
    k_dim = ctx.input_dims(A)[-1] if ctx.input_rank(A) else None
    if k_dim is None or (isinstance(k_dim, int) and k_dim != k):
        raise ctx.error(f"input 0 (A) has last dim {k_dim}; expected attribute K = {k}")
    expected = {
        _B: ((n * k + 1) // 2, "(N * K + 1) / 2", DataType.UINT8),
        _ABSMAX: (-(-n * k // block_size), "ceil(N * K / block_size)", dtype),
    }
    for i, (numel, formula, want) in expected.items():
        found = dims_product(ctx.input_dims(i))
        if isinstance(found, int) and found != numel:
            raise ctx.error(f"input {i} has {found} elements; expected {formula} = {numel}")
        if ctx.input_dtype(i) != want:
            raise ctx.error(f"input {i} has dtype {ctx.input_dtype(i).name.lower()}; expected {want.name.lower()}")
    run = math.gcd(k, block_size)
    if run < _WORD:
        raise unsupported(
            ctx,
            f"K = {k} with block_size {block_size}: blocks straddle columns inside a u32 word (supported: K % 8 == 0)",
        )
    return _Geometry(k, n, block_size, run, quant_type)


def _gathered_absmax(ctx: PlanCtx, g: _Geometry) -> BufferRef:
    """absmax per run of `g.run` elements of each column, [N, K / run], for a K that is not a multiple of
    block_size: run j of column n starts at flat element n * K + j * run, inside block (n K + j run) / block_size."""
    tensor = ctx.input_tensor(_ABSMAX)
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    if source is None or (isinstance(source, np.ndarray) and source.dtype == object):
        raise unsupported(
            ctx,
            f"input 2 (absmax) is only known at run time; with K = {g.k} not a multiple of block_size "
            f"{g.block_size} it must be a constant (the quantizer stores it as an initializer)",
        )
    runs = g.k // g.run
    starts = np.arange(g.n, dtype=np.int64)[:, None] * g.k + np.arange(runs, dtype=np.int64)[None, :] * g.run
    index = (starts // g.block_size).reshape(-1)

    def load() -> np.ndarray:
        data = source.numpy() if isinstance(source, TensorValue) else np.asarray(source)
        return np.ascontiguousarray(data.reshape(-1)[index].astype(np.float32))

    key = f"{tensor.name}:bnb4-runs-{g.run}-of-{g.k}"
    return ctx.constant(key, TensorValue(DataType.FLOAT, (g.n * runs,), load, name=key))
