"""MatMulNBits over the storage-binding limit: the weight's columns N in ranges, one dispatch each.

Phi-4-mini's untied lm head is MatMulNBits with N = 200064, K = 3072, block 32: 307 MB of repacked 4-bit
words, over the 128 MiB a storage binding may span on lavapipe (WebGPU's default). Its columns are
independent, so the product runs once per range of columns, each dispatch binding that range of B,
scales, zero points and bias and writing its columns of Y (matmul_nbits.wgsl's ``CHUNKED``). A is bound
whole by every range (and quantized once, at accuracy_level 4): a decode step costs one extra dispatch
per range, nothing more.

Ranges are whole panels of ``panel_columns("matmul_nbits")`` columns (32 x 2 on lavapipe), the unit a compile-time B is repacked in
(`packing.u32_words`), so a range of B is contiguous; `split_rows` chunks every per-column array by the
same panels, each range within the limit and 256-byte aligned in all of them (packed zero points: a
panel holds whole bytes, two blocks a byte; an odd byte count per column is fine as long as a range's
start is aligned, which `split_rows` guarantees or refuses with a PlanningError). Grouped weights (com.onyxia
MatMulNBitsGroup / GatedMatMulNBits) are never this large in a real model and are refused, not split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from onyxia.core import BufferRange, BufferRef, PlanCtx, PlanningError, max_binding_bytes
from onyxia.core.bindings import split_rows
from onyxia.operators.matmul.variants import panel_columns
from onyxia.operators.quantized.matmul_nbits_layout import A, Layout, Slot
from onyxia.operators.quantized.packing import PackedInput, bind_packed

__all__ = ["ColumnRange", "column_ranges"]


@dataclass(frozen=True)
class ColumnRange:
    """Columns [first, first + slots[0].n) of the product: the slots to plan (their `n` the range's
    width), the slot bindings by name (B0, SCALES0, ...), and the dims a range adds (none: the whole
    product, bound as usual)."""

    slots: Sequence[Slot]
    reads: dict[str, BufferRef | BufferRange]
    dims: dict[str, int]


def column_ranges(
    ctx: PlanCtx,
    layout: Layout,
    slots: Sequence[Slot],
    weights: Sequence[PackedInput],
    reads: dict[str, BufferRef],
) -> list[ColumnRange]:
    """The product in column ranges that each bind within `max_binding_bytes()`; one whole range when
    every slot's arrays fit."""
    whole = [ColumnRange(slots, dict(reads), {})]
    panel_bytes = [_panel_bytes(ctx, layout, slot, packed) for slot, packed in zip(slots, weights)]
    limit = max_binding_bytes()
    panels = [-(-slot.n // _panel()) for slot in slots]
    if all(
        _total(name, size, slot, packed) <= limit
        for slot, packed, sizes in zip(slots, weights, panel_bytes)
        for name, size in sizes.items()
    ):
        return whole
    where = f"node '{ctx.node.name}' ({ctx.node.op_type})"
    if len(slots) > 1:
        raise PlanningError(
            f"{where}: a grouped weight's arrays exceed the {limit}-byte storage binding limit; "
            "expected a lone MatMulNBits (only it is split into column ranges)"
        )
    (slot,), (sizes,) = slots, panel_bytes
    chunks = split_rows(panels[0], list(sizes.values()), limit, f"{where}: B, scales, zero points and bias per panel")
    ranges = []
    for i, chunk in enumerate(chunks):
        assert isinstance(chunk.rows, int)
        last = i == len(chunks) - 1
        first = chunk.first_row * _panel()
        columns = min(chunk.rows * _panel(), slot.n - first)
        chunk_reads: dict[str, BufferRef | BufferRange] = {
            # the last range binds to the end: the arrays other than a repacked B hold no padding columns
            name: BufferRange(reads[name], chunk.first_row * size, None if last else chunk.rows * size)
            for name, size in sizes.items()
        }
        ranges.append(ColumnRange([replace(slot, n=columns)], chunk_reads, {"COL0": first, "YN": slot.n}))
    return ranges


def _panel_bytes(ctx: PlanCtx, layout: Layout, slot: Slot, packed: PackedInput) -> dict[str, int]:
    """Bytes a panel of columns takes in each of the slot's bound arrays, by binding name (slot 0's, the
    only one split)."""
    item = ctx.input_dtype(A).gpu_numpy.itemsize  # scales, float zero points and bias are A's dtype
    word_bytes = 4 * layout.words_per_column  # a column's packed bytes
    panel = _panel()
    sizes = {"B0": panel * word_bytes * (4 if packed.widened else 1), "SCALES0": panel * layout.n_blocks * item}
    if layout.zero_points == "packed":
        widened = bind_packed(ctx, slot.zero_points).widened
        sizes["ZP0"] = panel * ((layout.n_blocks + 1) // 2) * (4 if widened else 1)
    elif layout.zero_points == "float":
        sizes["ZP0"] = panel * layout.n_blocks * item
    if layout.bias:
        sizes["BIAS0"] = panel * item
    return sizes


def _total(name: str, panel_bytes: int, slot: Slot, packed: PackedInput) -> int:
    """Bytes of a whole bound array: a repacked B holds whole panels (zero-padded columns), the rest N columns."""
    if name == "B0" and not packed.widened:
        return -(-slot.n // _panel()) * panel_bytes
    return -(-slot.n * panel_bytes // _panel())


def _panel() -> int:
    """Columns per panel of a repacked B in the chosen kernel variant."""
    return panel_columns("matmul_nbits")
