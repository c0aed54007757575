"""com.microsoft MatMulNBits: A [..., K] times 4-bit block-quantized weights B [N, n_blocks, block_size / 2].

What onnxruntime's quantizer and the onnxruntime-genai builder emit for every linear layer of an
int4 LLM. Weights stay packed on the GPU (see `packing`) and are dequantised in the shader,
``W[n, k] = (nibble - zero_point) * scale[n, k / block_size]``, with zero point 8 when the input is
absent, else two 4-bit zero points per byte (uint8) or floats of the scales' dtype.

Numerics follow onnxruntime's CPU kernel (1.31), which picks them per node (`_int8_activations`):
- ``accuracy_level`` 4 (the Gemma and genai int4 fixtures): MLAS's CompInt8 path. Each row of A is
  quantized to int8 per block (scale amax / 127, round half to even; onyxia::quant), and each block
  adds (scale_a * scale_b) * sum_k qa_k (q_k - zp) with an exact integer sum; MLAS's order of the
  float sums is not reproduced (about 1e-7 relative). An f16 A is widened first and the f32 result
  rounded once, as onnxruntime does on x86. The prefill kernel reads A quantized by a dispatch of
  matmul_nbits_quantize.wgsl; a decode workgroup quantizes its one row itself, in workgroup memory
  (`Q_SHARED`), so a decode step costs one dispatch, not two. When A's producer wrote it quantized (a norm's
  Int8A twin: `int8_activations`, the `QuantizeInNorm` pass) every tile reads that and nothing quantizes.
- Levels 0-3, and level 4 where onnxruntime falls back to dequantizing B: products and sums in f32
  whatever the activation dtype (level 0's numerics).

One shader, four tiles (`matmul_nbits_tiles`): decode, one row per thread (M = 1, the GEMV of each generated
token); rows4 and rows8, a batched decode step (M = 2 .. 8, one token per stream), the decode tile with 4 or 8
rows per thread sharing each weight unpack, each row's outputs bit-identical to the decode tile's; and prefill
(the "matmul_nbits" tiles of the chosen `onyxia.operators.matmul.variants` row). Each thread owns
4 * column_groups adjacent columns of B repacked in column panels (see the shader). With a symbolic M all are
planned, and those outside the run's M dispatch zero workgroups.
`plan_products` also serves the com.onyxia groups (matmul_nbits_group), several weights per dispatch.
A weight over the storage-binding limit (Phi-4-mini's lm head) runs in column ranges (matmul_nbits_ranges).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onyxia.core import (
    BufferRef,
    InferenceCtx,
    OperatorBase,
    PlanCtx,
    PlanningError,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import type_defs
from onyxia.operators.matmul.tiles import Tile
from onyxia.operators.matmul.variants import chosen_variant, labelled, panel_columns, shared_a_defs, tile_for
from onyxia.operators.quantized.int8_activations import int8_activations, rows_padded
from onyxia.operators.quantized.matmul_nbits_layout import SINGLE, A, Layout, Slot, nbits_layout, unsupported
from onyxia.operators.quantized.matmul_nbits_ranges import column_ranges
from onyxia.operators.quantized.matmul_nbits_tiles import SPREAD_ROWS, nbits_tiles
from onyxia.operators.quantized.packing import PackedInput, bind_packed
from onyxia.operators.rolled_loops import short_loop

__all__ = ["MatMulNBitsOp", "plan_products", "unsupported"]


@dataclass(frozen=True)
class MatMulNBitsOp(OperatorBase):
    name: str = "MatMulNBits"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        nbits_layout(ctx, [Slot(*SINGLE, ctx.attr_int("N"))])
        dims = ctx.input_dims(A)
        return [TensorType(ctx.input_dtype(A), shape_of([*dims[:-1], ctx.attr_int("N")]))]

    def plan(self, ctx: PlanCtx) -> None:
        slot = Slot(*SINGLE, ctx.attr_int("N"))
        plan_products(ctx, nbits_layout(ctx, [slot]), [slot])


def plan_products(
    ctx: PlanCtx,
    layout: Layout,
    slots: Sequence[Slot],
    activation: str | None = None,
    scales: Sequence[BufferRef] | None = None,
    quantized_a: tuple[BufferRef, BufferRef] | None = None,
) -> None:
    """Dispatch A times each slot's weights into output s (with `activation`, the shaders' ACTIVATION def
    gelu_none | gelu_tanh | silu: one output, activation(A @ w0) * (A @ w1)). `scales` replaces the slots'
    scale inputs with derived buffers ([N, NB] each; MatMulBnb4's absmax regathered per column block).
    `quantized_a`: A's int8 rows and block scales as A's producer wrote them (`int8_activations`' layout), so
    every tile reads them and no quantize dispatch runs."""
    m = dims_product(ctx.input_dims(A)[:-1])
    weights = [bind_packed(ctx, slot.b, columns=slot.n, pad=panel_columns("matmul_nbits")) for slot in slots]
    _check_products(ctx, layout, slots, weights, activation)
    int8 = _int8_activations(ctx, layout, all(w.known for w in weights))
    if quantized_a is not None and not int8:
        raise PlanningError(
            f"node '{ctx.node.name}' ({ctx.node.op_type}): A comes quantized (attribute quantized_a) but the product "
            "does not run int8 activations (accuracy_level 4, block_size <= 256, no float zero points, constant weights)"
        )
    tiles = nbits_tiles(m)  # decode, rows, prefill, or some of them, each with its share of the run
    forms = {tile: "quantized" if quantized_a else _a_form(layout, tile, int8) for tile, _ in tiles}
    quantized = quantized_a
    quantize_share = sum(share for tile, share in tiles if forms[tile] == "quantized")
    if quantized is None and not (isinstance(quantize_share, int) and quantize_share == 0):
        quantized = _quantize_activations(ctx, layout, m, quantize_share)
    slot_reads, defs = _slot_bindings(ctx, layout, slots, weights, scales)
    if activation is not None:
        defs |= {"GATED": True, "ACTIVATION": activation}
    ranges = column_ranges(ctx, layout, slots, weights, slot_reads)  # one unless B passes the binding limit
    outputs = [ctx.output(0)] if activation is not None else [ctx.output(s) for s in range(len(slots))]
    for kernel, share in tiles:
        a_reads, a_names, a_defs = _a_bindings(ctx, layout, quantized, forms[kernel])
        names = [*a_names, *slot_reads, *(f"Y{s}" for s in range(len(outputs)))]
        kernel_defs = {**defs, **a_defs, **{f"BIND_{name}": i for i, name in enumerate(names)}}
        for columns in ranges:
            dims = _dims(layout, columns.slots, m, int8) | columns.dims
            range_defs = {**kernel_defs, "CHUNKED": True} if columns.dims else dict(kernel_defs)
            groups = _workgroups(kernel, columns.slots, activation is not None, dims, range_defs)
            reads = [*a_reads, *columns.reads.values()]
            _dispatch(ctx, kernel, groups * share, reads, outputs, range_defs, dims)


def _check_products(
    ctx: PlanCtx, layout: Layout, slots: Sequence[Slot], weights: Sequence[PackedInput], activation: str | None
) -> None:
    """Groups read every weight repacked at compile time (the slot accessors have no widened form)."""
    where = f"node '{ctx.node.name}' ({ctx.node.op_type})"
    if len(slots) > 1 and not all(w.known and not _widened_zero_points(ctx, layout, s) for w, s in zip(weights, slots)):
        raise PlanningError(f"{where}: grouped weights must be compile-time data")
    if activation is not None and (len(slots) != 2 or layout.bias):
        raise PlanningError(f"{where}: a gated product has two weights and no bias")


def _dims(layout: Layout, slots: Sequence[Slot], m: SymbolicDim, int8: bool) -> dict[str, SymbolicDim]:
    dims: dict[str, SymbolicDim] = {
        "M": m,
        "K": layout.k,
        "NB": layout.n_blocks,
        "WPB": layout.block_size // 8,
        "WPC": layout.words_per_column,
        "ZB": (layout.n_blocks + 1) // 2,
    }
    for s, slot in enumerate(slots):
        dims[f"N{s}"] = slot.n
    if int8:
        kp = layout.n_blocks * layout.block_size
        dims |= {"KP": kp, "KP4": kp // 4, "MP": rows_padded(m)}
    return dims


def _widened_zero_points(ctx: PlanCtx, layout: Layout, slot: Slot) -> bool:
    return layout.zero_points == "packed" and bind_packed(ctx, slot.zero_points).widened


def _workgroups(kernel: Tile, slots: Sequence[Slot], gated: bool, dims: dict, defs: dict) -> SymbolicDim:
    """Column workgroups over every slot (slot s starts at G<s>), or over slot 0's columns when gated."""
    per_slot = [ceil_div(slot.n, kernel.columns_per_workgroup) for slot in slots]
    defs["OTHER_SLOTS"] = " ".join(str(s) for s in range(1, len(slots)))  # the shader's `#for` list
    if gated:
        return per_slot[0]
    for s in range(1, len(slots)):
        dims[f"G{s}"] = sum(per_slot[:s])
    return sum(per_slot)


def _dispatch(
    ctx: PlanCtx, kernel: Tile, groups: SymbolicDim, reads: list, writes: list, defs: dict, dims: dict
) -> None:
    source = load_wgsl(__package__, "matmul_nbits.wgsl")
    kernel_defs = {
        **defs,
        "PANEL": panel_columns("matmul_nbits"),
        "ROWS": kernel.rows,
        "ROW_ITEMS": " ".join(str(r) for r in range(kernel.rows)),
        "CG": kernel.column_groups,
        "CG_ITEMS": " ".join(str(g) for g in range(kernel.column_groups)),
        "WPB_CHUNKS": max(1, dims["WPB"] // 4),
        "SPLIT": kernel.split,
        "WORKGROUP_SIZE": kernel.workgroup_size,
    }
    if kernel.split == 1 and short_loop(dims["NB"]):
        kernel_defs["ROLLED_NB"] = True  # its loop over the blocks stays a loop (rolled_loops; split: never unrolled)
    if kernel.split > 1 and chosen_variant().subgroup_split:
        kernel_defs["SUBGROUP_SPLIT"] = True  # the split threads are neighbouring lanes of one subgroup
    kernel_defs["A_READS"] = "w"  # onyxia::nbits_shared_rows' ways of spreading rows of a: one copy of the sums each
    if kernel.split == 1:
        kernel_defs |= shared_a_defs()  # every thread of a workgroup reads the same rows of a
        if "SHARED_A" in kernel_defs and kernel.rows in SPREAD_ROWS:
            kernel_defs["SPREAD_A"] = True  # each lane loads one of the rows for the whole subgroup
            kernel_defs["A_READS"] = "w n" if kernel.rows == 8 else "w"
    label = labelled(f"MatMulNBits/{kernel.name}")
    shader = ctx.compile_shader(label, source, kernel_defs, dims)
    ctx.dispatch(shader, reads, writes, (groups, 1, ceil_div(dims["M"], kernel.rows)))


def _a_form(layout: Layout, kernel: Tile, int8: bool) -> str:
    """How `kernel` reads A: "shared" (the decode tile quantizes its row in workgroup memory), "quantized" (the
    quantize dispatch's output) or "float"."""
    if not int8:
        return "float"
    return "shared" if kernel == tile_for("matmul_nbits", 1) and _fits_workgroup(layout, kernel) else "quantized"


def _partial_bytes(kernel: Tile) -> int:
    """Workgroup memory of the split-K partial sums (vec4s; none without split or with subgroup shuffles)."""
    split = kernel.split > 1 and not chosen_variant().subgroup_split
    return 16 * kernel.workgroup_size * kernel.rows * kernel.column_groups if split else 0


def _fits_workgroup(layout: Layout, kernel: Tile) -> bool:
    """Whether a `kernel` workgroup can hold its quantized row and block scales (f32 each) beside the
    split-K partial sums (vec4s)."""
    row = 4 * (layout.n_blocks * layout.block_size + layout.n_blocks)
    return kernel.rows == 1 and row + _partial_bytes(kernel) <= chosen_variant().workgroup_storage


def _int8_activations(ctx: PlanCtx, layout: Layout, weights_known: bool) -> bool:
    """Whether onnxruntime's CPU kernel runs this node with int8 activations (`int8_activations`)."""
    return int8_activations(ctx.attr_int("accuracy_level", 0), layout.block_size, layout.zero_points, weights_known)


def _quantize_activations(
    ctx: PlanCtx, layout: Layout, m: SymbolicDim, share: SymbolicDim
) -> tuple[BufferRef, BufferRef]:
    """Dispatch matmul_nbits_quantize.wgsl (`share`: 0 or 1 at run time): A's int8 values (packed bytes) and
    their per-block scales."""
    row_blocks = m * layout.n_blocks
    quantized = ctx.alloc_scratch(row_blocks * layout.block_size, "quantized_a")  # int8, 4 to a u32
    scales = ctx.alloc_scratch(layout.n_blocks * rows_padded(m) * 4, "a_scales")
    workgroup_size = tile_for("matmul_nbits_quantize", 1).workgroup_size
    defs = {**type_defs(A_T=ctx.input_dtype(A)), "BLOCK_SIZE": layout.block_size, "WORKGROUP_SIZE": workgroup_size}
    if layout.k % 4 == 0:
        defs["QA_VEC4"] = True
    dims = {"K": layout.k, "NB": layout.n_blocks, "ROW_BLOCKS": row_blocks, "MP": rows_padded(m)}
    source = load_wgsl(__package__, "matmul_nbits_quantize.wgsl")
    shader = ctx.compile_shader("MatMulNBits/quantize", source, defs, dims)
    groups = ceil_div(row_blocks, workgroup_size) * share
    ctx.dispatch(shader, [ctx.input(A)], [quantized, scales], groups)
    return quantized, scales


def _a_bindings(
    ctx: PlanCtx, layout: Layout, quantized: tuple[BufferRef, BufferRef] | None, form: str
) -> tuple[list[BufferRef], list[str], dict[str, object]]:
    """A's bindings, their names and the defs they set for a kernel reading it in `form` (see `_a_form`)."""
    vec4 = {"QA_VEC4": True} if layout.k % 4 == 0 else {}
    if form == "shared":
        return [ctx.input(A)], ["A"], {"INT8": True, "Q_SHARED": True, **vec4}
    if form == "quantized":
        assert quantized is not None
        return list(quantized), ["A", "A_SCALES"], {"INT8": True}
    return [ctx.input(A)], ["A"], {}


def _slot_bindings(
    ctx: PlanCtx,
    layout: Layout,
    slots: Sequence[Slot],
    weights: Sequence[PackedInput],
    scales: Sequence[BufferRef] | None,
) -> tuple[dict[str, BufferRef], dict[str, object]]:
    """Each slot's read bindings by binding name (B0, SCALES0, ...), and the defs naming their forms."""
    reads: dict[str, BufferRef] = {}
    defs: dict[str, object] = {**type_defs(A_T=ctx.input_dtype(A), Y_T=ctx.input_dtype(A)), "ZP": layout.zero_points}
    if weights[0].widened:
        defs["B_WIDENED"] = True
    if layout.k % layout.block_size:
        defs["K_TAIL"] = True
    if layout.k % 8 == 0:
        defs["A_VEC4"] = True  # rows start on 8-element boundaries: read a as vec4s
    if layout.bias:
        defs["BIAS"] = True
    if layout.codebook is not None:
        defs["CODEBOOK"] = layout.codebook
    if layout.zero_points in ("packed", "float"):
        defs["A_SUMS"] = True  # per-column zero points: sum_k a (q - z) = sum_k a q - z sum_k a
    for s, (slot, packed) in enumerate(zip(slots, weights)):
        reads[f"B{s}"] = packed.buffer
        reads[f"SCALES{s}"] = scales[s] if scales is not None else ctx.input(slot.scales)
        if layout.zero_points == "packed":
            zero_points = bind_packed(ctx, slot.zero_points)
            reads[f"ZP{s}"] = zero_points.buffer
            if zero_points.widened:
                defs["ZP_WIDENED"] = True
        elif layout.zero_points == "float":
            reads[f"ZP{s}"] = ctx.input(slot.zero_points)
        if layout.bias:
            reads[f"BIAS{s}"] = ctx.input(slot.bias)
    return reads, defs
