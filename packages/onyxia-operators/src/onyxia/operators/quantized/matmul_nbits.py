"""com.microsoft MatMulNBits: A [..., K] times 4-bit block-quantized weights B [N, n_blocks, block_size / 2].

What onnxruntime's quantizer and the onnxruntime-genai builder emit for every linear layer of an
int4 LLM. Weights stay packed on the GPU (see `packing`) and are dequantised in the shader,
``W[n, k] = (nibble - zero_point) * scale[n, k / block_size]``, with zero point 8 when the input is
absent, else two 4-bit zero points per byte (uint8) or floats of the scales' dtype.

Numerics follow onnxruntime's CPU kernel (1.31), which picks them per node (`_int8_activations`):
- ``accuracy_level`` 4 (the Gemma and genai int4 fixtures): MLAS's CompInt8 path. Each row of A is
  quantized to int8 per block (scale amax / 127, round half to even; matmul_nbits_quantize.wgsl), and
  each block adds (scale_a * scale_b) * sum_k qa_k (q_k - zp) with an exact integer sum; MLAS's
  order of the float sums is not reproduced (about 1e-7 relative). An f16 A is widened first and the
  f32 result rounded once, as onnxruntime does on x86.
- Levels 0-3, and level 4 where onnxruntime falls back to dequantizing B: products and sums in f32
  whatever the activation dtype (level 0's numerics).

One shader, two specialisations (`Kernel`): DECODE, one row per thread (M = 1, the GEMV of each
generated token), and PREFILL, 4 rows per thread sharing each weight unpack. Each thread owns 4
adjacent columns of a word-major repacked B (see the shader). With a symbolic M both are planned,
and the one on the wrong side of DECODE_MAX_M dispatches zero workgroups at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import (
    BufferRef,
    DataType,
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    TensorType,
    UnsupportedOpError,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import type_defs
from onyxia.operators.quantized.packing import PackedInput, bind_packed
from onyxia.operators.typesets import FLOATS

__all__ = ["DECODE", "DECODE_MAX_M", "PREFILL", "Kernel", "MatMulNBitsOp", "unsupported"]


@dataclass(frozen=True)
class Kernel:
    """One specialisation of matmul_nbits.wgsl: `rows` x 4 * `column_groups` outputs per thread, `split`
    threads sharing them (splitting K)."""

    label: str
    rows: int
    column_groups: int = 1
    split: int = 1
    workgroup_size: int = 64

    @property
    def columns_per_workgroup(self) -> int:
        return 4 * self.column_groups * self.workgroup_size // self.split


# Measured on lavapipe (K 640, N 2048, per kernel): decode 0.25 ms; splitting K over threads costs more
# in barriers than it gains (split 8: 2-3x slower); 8 columns per thread beat 4 by ~12% (each load of a
# serves more columns); prefill at M = 37 takes 8 ms with 4 rows x 8 columns per thread, 20 ms with the
# decode kernel. A discrete GPU would want split 8-32 for decode, to keep enough threads in flight.
DECODE = Kernel("MatMulNBits/decode", rows=1, column_groups=2)
PREFILL = Kernel("MatMulNBits/prefill", rows=4, column_groups=2)
DECODE_MAX_M = 1  # rows up to which DECODE runs (one row per workgroup z); PREFILL above
QUANTIZE_WORKGROUP_SIZE = 64
_INT8_MAX_BLOCK_SIZE = 256  # MLAS has CompInt8 kernels for block sizes 16 .. 256
_COLUMN_PAD = 8  # the repacked B's columns are padded to a multiple of every kernel's 4 * column_groups
_A, _B, _SCALES, _ZERO_POINTS, _G_IDX, _BIAS = range(6)


@dataclass(frozen=True)
class _Layout:
    """The weight geometry, from the attributes (checked against the inputs)."""

    k: int
    n: int
    block_size: int
    zero_points: str  # "none" | "packed" | "float": the shader's ZP def

    @property
    def n_blocks(self) -> int:
        return -(-self.k // self.block_size)

    @property
    def words_per_column(self) -> int:
        return self.n_blocks * self.block_size // 8


def unsupported(ctx: NodeCtx, message: str) -> UnsupportedOpError:
    node = ctx.node
    return UnsupportedOpError(f"node '{node.name}' ({node.op_type}, domain {node.domain or 'ai.onnx'}): {message}")


def _layout(ctx: NodeCtx) -> _Layout:
    bits = ctx.attr_int("bits", 4)
    if bits != 4:
        raise unsupported(ctx, f"attribute 'bits' = {bits} is not implemented (supported: 4)")
    if ctx.has_input(_G_IDX):
        raise unsupported(ctx, "input 4 (g_idx, act-order GPTQ) is not implemented; re-quantize without act-order")
    k, n, block_size = ctx.attr_int("K"), ctx.attr_int("N"), ctx.attr_int("block_size")
    if block_size < 16 or block_size & (block_size - 1):
        raise ctx.error(f"attribute 'block_size' = {block_size}; expected a power of two >= 16")
    dtype = ctx.input_dtype(_A)
    if dtype not in FLOATS:
        raise unsupported(ctx, f"input 0 (A) dtype {dtype.name.lower()} is not implemented (supported: float, float16)")
    zero_points = "none"
    if ctx.has_input(_ZERO_POINTS):
        zero_points = "packed" if ctx.input_dtype(_ZERO_POINTS) == DataType.UINT8 else "float"
    layout = _Layout(k, n, block_size, zero_points)
    _check_inputs(ctx, layout, dtype)
    return layout


def _check_inputs(ctx: NodeCtx, layout: _Layout, dtype: DataType) -> None:
    k_dim = ctx.input_dims(_A)[-1] if ctx.input_rank(_A) else None
    if isinstance(k_dim, int) and k_dim != layout.k:
        raise ctx.error(f"input 0 (A) has last dim {k_dim}; expected attribute K = {layout.k}")
    expected = {
        _B: (layout.n * layout.n_blocks * layout.block_size // 2, "N * ceil(K / block_size) * block_size / 2"),
        _SCALES: (layout.n * layout.n_blocks, "N * ceil(K / block_size)"),
        _BIAS: (layout.n, "N"),
    }
    if layout.zero_points == "packed":
        expected[_ZERO_POINTS] = (layout.n * ((layout.n_blocks + 1) // 2), "N * ceil(ceil(K / block_size) / 2)")
    elif layout.zero_points == "float":
        expected[_ZERO_POINTS] = (layout.n * layout.n_blocks, "N * ceil(K / block_size)")
    for i, (numel, formula) in expected.items():
        if not ctx.has_input(i):
            continue
        found = dims_product(ctx.input_dims(i))
        if isinstance(found, int) and found != numel:
            raise ctx.error(f"input {i} has {found} elements; expected {formula} = {numel}")
        want = DataType.UINT8 if i == _B else dtype
        if i == _ZERO_POINTS and layout.zero_points == "packed":
            continue
        if ctx.input_dtype(i) != want:
            raise ctx.error(f"input {i} has dtype {ctx.input_dtype(i).name.lower()}; expected {want.name.lower()}")


def _at_most(m: SymbolicDim, limit: int) -> SymbolicDim:
    """1 when m <= limit else 0 (for m >= 0), as a dim expression the runtime evaluates per run."""
    if isinstance(m, int):
        return int(m <= limit)
    return ((limit + 1) // (m + 1) + limit) // (limit + 1)  # type: ignore[operator]


@dataclass(frozen=True)
class MatMulNBitsOp(OperatorBase):
    name: str = "MatMulNBits"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        layout = _layout(ctx)
        dims = ctx.input_dims(_A)
        return [TensorType(ctx.input_dtype(_A), shape_of([*dims[:-1], layout.n]))]

    def plan(self, ctx: PlanCtx) -> None:
        layout = _layout(ctx)
        m = dims_product(ctx.input_dims(_A)[:-1])
        weights = bind_packed(ctx, _B, columns=layout.n, pad=_COLUMN_PAD)  # word-major: see matmul_nbits.wgsl
        int8 = _int8_activations(ctx, layout, weights.known)
        reads, defs = _bindings(ctx, layout, weights, _quantize_activations(ctx, layout, m) if int8 else None)
        dims = {
            "M": m,
            "K": layout.k,
            "N": layout.n,
            "NP": -(-layout.n // _COLUMN_PAD) * _COLUMN_PAD,
            "NB": layout.n_blocks,
            "WPB": layout.block_size // 8,
            "WPC": layout.words_per_column,
            "ZB": (layout.n_blocks + 1) // 2,
        }
        if int8:
            dims |= {"KP": layout.n_blocks * layout.block_size, "MP": _rows_padded(m)}
        decode = _at_most(m, DECODE_MAX_M)  # 1, 0, or an expression evaluated per run
        for kernel, share in ((DECODE, decode), (PREFILL, 1 - decode)):  # type: ignore[operator]
            if share == 0:
                continue
            _dispatch(ctx, kernel, share, reads, defs, dims)


def _dispatch(ctx: PlanCtx, kernel: Kernel, share: SymbolicDim, reads: list, defs: dict, dims: dict) -> None:
    """`kernel` over all of y; `share` (0 or 1 at run time) zeroes the dispatch when the other kernel runs."""
    source = load_wgsl(__package__, "matmul_nbits.wgsl")
    kernel_defs = {
        **defs,
        "ROWS": kernel.rows,
        "CG": kernel.column_groups,
        "SPLIT": kernel.split,
        "WORKGROUP_SIZE": kernel.workgroup_size,
    }
    # the int8 path reads a workgroup's rows' scales as one vec4 (see matmul_nbits.wgsl)
    assert not defs.get("INT8") or 4 % kernel.rows == 0, f"{kernel.label}: rows must divide 4"
    shader = ctx.compile_shader(kernel.label, source, kernel_defs, dims)
    groups = ceil_div(dims["N"], kernel.columns_per_workgroup) * share  # type: ignore[operator]
    ctx.dispatch(shader, reads, [ctx.output(0)], (groups, 1, ceil_div(dims["M"], kernel.rows)))


def _rows_padded(m: SymbolicDim) -> SymbolicDim:
    """M rounded up to 4: the int8 path stores A's scales block-major, 4 rows to a vec4."""
    return ceil_div(m, 4) * 4  # type: ignore[operator]


def _int8_activations(ctx: PlanCtx, layout: _Layout, weights_known: bool) -> bool:
    """Whether onnxruntime's CPU kernel runs this node with int8 activations (MLAS CompInt8).

    It asks for CompInt8 at accuracy_level 4 when MLAS has the kernel (block sizes 16 .. 256), but
    only a prepacked B runs it: B must be a constant initializer, and float zero points or g_idx
    skip prepacking; all of those dequantize B and compute in f32 instead. (With runtime uint8 zero
    points onnxruntime 1.31 ignores them at level 4, using 8; that is a bug, not reproduced.)
    """
    level = ctx.attr_int("accuracy_level", 0)
    return level == 4 and layout.block_size <= _INT8_MAX_BLOCK_SIZE and layout.zero_points != "float" and weights_known


def _quantize_activations(ctx: PlanCtx, layout: _Layout, m: SymbolicDim) -> tuple[BufferRef, BufferRef]:
    """Dispatch matmul_nbits_quantize.wgsl: A's int8 values (as f32) and their per-block scales."""
    row_blocks = m * layout.n_blocks  # type: ignore[operator]
    quantized = ctx.alloc_scratch(row_blocks * layout.block_size * 4, "quantized_a")
    scales = ctx.alloc_scratch(layout.n_blocks * _rows_padded(m) * 4, "a_scales")
    defs = {
        **type_defs(A_T=ctx.input_dtype(_A)),
        "BLOCK_SIZE": layout.block_size,
        "WORKGROUP_SIZE": QUANTIZE_WORKGROUP_SIZE,
    }
    if layout.k % 4 == 0:
        defs["A_VEC4"] = True
    dims = {"K": layout.k, "NB": layout.n_blocks, "ROW_BLOCKS": row_blocks, "MP": _rows_padded(m)}
    source = load_wgsl(__package__, "matmul_nbits_quantize.wgsl")
    shader = ctx.compile_shader("MatMulNBits/quantize", source, defs, dims)
    ctx.dispatch(shader, [ctx.input(_A)], [quantized, scales], ceil_div(row_blocks, QUANTIZE_WORKGROUP_SIZE))
    return quantized, scales


def _bindings(
    ctx: PlanCtx, layout: _Layout, weights: PackedInput, int8: tuple[BufferRef, BufferRef] | None
) -> tuple[list, dict[str, object]]:
    """Read bindings in the shader's order, and the defs naming their slots and storage forms;
    `int8`: the quantized A and its scales, read instead of A."""
    reads = [int8[0] if int8 else ctx.input(_A), weights.buffer, ctx.input(_SCALES)]
    defs = {**type_defs(A_T=ctx.input_dtype(_A)), "ZP": layout.zero_points}
    if weights.widened:
        defs["B_WIDENED"] = True
    if layout.k % layout.block_size:
        defs["K_TAIL"] = True
    if layout.k % 8 == 0:
        defs["A_VEC4"] = True  # rows start on 8-element boundaries: read a as vec4s
    if layout.zero_points == "packed":
        zero_points = bind_packed(ctx, _ZERO_POINTS)
        reads.append(zero_points.buffer)
        if zero_points.widened:
            defs["ZP_WIDENED"] = True
    elif layout.zero_points == "float":
        reads.append(ctx.input(_ZERO_POINTS))
    defs["ZP_BINDING"] = len(reads) - 1
    if ctx.has_input(_BIAS):
        reads.append(ctx.input(_BIAS))
        defs["BIAS"] = True
    defs["BIAS_BINDING"] = len(reads) - 1
    if int8:
        reads.append(int8[1])
        defs["INT8"] = True
    defs["A_SCALES_BINDING"] = len(reads) - 1
    defs["Y_BINDING"] = len(reads)
    return reads, defs
