"""MatMulNBits' weight geometry and input checks, for the com.microsoft op and the com.onyxia groups.

A product reads A and one or more weights ("slots"): com.microsoft MatMulNBits has one (inputs 1, 2, 3
and 5), com.onyxia MatMulNBitsGroup / GatedMatMulNBits several (four inputs each after A: B, scales,
zero_points, bias). Every slot shares K, bits, block_size and the zero-point form, so one shader serves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onyxia.core import DataType, NodeCtx, UnsupportedOpError
from onyxia.core.shapes import dims_product
from onyxia.operators.typesets import FLOATS

__all__ = ["A", "SINGLE", "Layout", "Slot", "group_slots", "nbits_layout", "unsupported"]

A = 0  # input 0 is A in every form
_G_IDX = 4  # com.microsoft MatMulNBits only


@dataclass(frozen=True)
class Slot:
    """One weight: its input positions (zero_points and bias may be absent) and its column count N."""

    b: int
    scales: int
    zero_points: int
    bias: int
    n: int


SINGLE = (1, 2, 3, 5)  # com.microsoft MatMulNBits: B, scales, zero_points, bias (4 is g_idx)


def group_slots(ns: Sequence[int]) -> list[Slot]:
    """The slots of a com.onyxia group: after A, four inputs per weight."""
    return [Slot(1 + 4 * s, 2 + 4 * s, 3 + 4 * s, 4 + 4 * s, n) for s, n in enumerate(ns)]


@dataclass(frozen=True)
class Layout:
    """The geometry every slot shares, from the attributes (checked against the inputs)."""

    k: int
    block_size: int
    zero_points: str  # "none" | "packed" | "float" | "zero" (a code table's signed values): the shader's ZP def
    bias: bool
    codebook: str | None = None  # the CODEBOOK def (com.microsoft MatMulBnb4): 16 WGSL values a nibble decodes to

    @property
    def n_blocks(self) -> int:
        return -(-self.k // self.block_size)

    @property
    def words_per_column(self) -> int:
        return self.n_blocks * self.block_size // 8


def unsupported(ctx: NodeCtx, message: str) -> UnsupportedOpError:
    node = ctx.node
    return UnsupportedOpError(f"node '{node.name}' ({node.op_type}, domain {node.domain or 'ai.onnx'}): {message}")


def nbits_layout(ctx: NodeCtx, slots: Sequence[Slot]) -> Layout:
    bits = ctx.attr_int("bits", 4)
    if bits != 4:
        raise unsupported(ctx, f"attribute 'bits' = {bits} is not implemented (supported: 4)")
    if ctx.node.domain == "com.microsoft" and ctx.has_input(_G_IDX):
        raise unsupported(ctx, "input 4 (g_idx, act-order GPTQ) is not implemented; re-quantize without act-order")
    k, block_size = ctx.attr_int("K"), ctx.attr_int("block_size")
    if block_size < 16 or block_size & (block_size - 1):
        raise ctx.error(f"attribute 'block_size' = {block_size}; expected a power of two >= 16")
    dtype = ctx.input_dtype(A)
    if dtype not in FLOATS:
        raise unsupported(ctx, f"input 0 (A) dtype {dtype.name.lower()} is not implemented (supported: float, float16)")
    forms = {_zero_point_form(ctx, slot) for slot in slots}
    biases = {ctx.has_input(slot.bias) for slot in slots}
    if len(forms) > 1 or len(biases) > 1:
        raise ctx.error("every weight of a group needs the same zero-point form and bias presence")
    layout = Layout(k, block_size, forms.pop(), biases.pop())
    k_dim = ctx.input_dims(A)[-1] if ctx.input_rank(A) else None
    if isinstance(k_dim, int) and k_dim != layout.k:
        raise ctx.error(f"input 0 (A) has last dim {k_dim}; expected attribute K = {layout.k}")
    for slot in slots:
        _check_slot(ctx, layout, slot, dtype)
    return layout


def _zero_point_form(ctx: NodeCtx, slot: Slot) -> str:
    if not ctx.has_input(slot.zero_points):
        return "none"
    return "packed" if ctx.input_dtype(slot.zero_points) == DataType.UINT8 else "float"


def _check_slot(ctx: NodeCtx, layout: Layout, slot: Slot, dtype: DataType) -> None:
    n = slot.n
    expected = {
        slot.b: (n * layout.n_blocks * layout.block_size // 2, "N * ceil(K / block_size) * block_size / 2"),
        slot.scales: (n * layout.n_blocks, "N * ceil(K / block_size)"),
        slot.bias: (n, "N"),
    }
    if layout.zero_points == "packed":
        expected[slot.zero_points] = (n * ((layout.n_blocks + 1) // 2), "N * ceil(ceil(K / block_size) / 2)")
    elif layout.zero_points == "float":
        expected[slot.zero_points] = (n * layout.n_blocks, "N * ceil(K / block_size)")
    for i, (numel, formula) in expected.items():
        if not ctx.has_input(i):
            continue
        found = dims_product(ctx.input_dims(i))
        if isinstance(found, int) and found != numel:
            raise ctx.error(f"input {i} has {found} elements; expected {formula} = {numel}")
        want = DataType.UINT8 if i == slot.b else dtype
        if i == slot.zero_points and layout.zero_points == "packed":
            continue
        if ctx.input_dtype(i) != want:
            raise ctx.error(f"input {i} has dtype {ctx.input_dtype(i).name.lower()}; expected {want.name.lower()}")
