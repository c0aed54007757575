"""com.onyxia MatMulNBitsGroup and GatedMatMulNBits: several MatMulNBits of one activation in one dispatch.

``MatMulNBitsGroup(A, B0, scales0, zero_points0, bias0, B1, ...) -> Y0, Y1, ...`` computes each
com.microsoft MatMulNBits ``Y_s = MatMulNBits(A, B_s, scales_s, zero_points_s, bias_s)`` (four inputs per
weight, any of zero_points / bias empty; attributes K, bits, block_size, accuracy_level as MatMulNBits', and
`N` the list of each weight's N; with attribute quant_type each weight is a grouped com.microsoft MatMulBnb4's
B and absmax, no zero points or bias). Every weight keeps its own bindings; at accuracy_level 4 A is quantized
once for all of them. ``GatedMatMulNBits`` (two weights, no bias, attributes `activation` "gelu" (default, with
`approximate` as Gelu's) or "silu", as GatedMatMul's) is ``act(Y_0) * Y_1``, one output. The `GroupMatMuls` and `FuseMlpGate` passes produce them.
With attribute ``quantized_a`` = 1 (the `QuantizeInNorm` pass) two more inputs follow the last weight's four:
A's int8 rows ``qa`` and block scales ``sa`` as A's producer wrote them (`int8_activations`); A itself then
only gives the shapes, and no tile quantizes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from onyxia.core import Absent, InferenceCtx, NodeCtx, OperatorBase, PlanCtx, TensorType, shape_of
from onyxia.operators.matmul.matmul_group import gate_activation
from onyxia.operators.quantized.int8_activations import quantized_a_types
from onyxia.operators.quantized.matmul_bnb4 import codebook_literals
from onyxia.operators.quantized.matmul_nbits import plan_products
from onyxia.operators.quantized.matmul_nbits_layout import A, Layout, Slot, group_slots, nbits_layout

__all__ = ["MATMUL_NBITS_GROUP", "MatMulNBitsGroupOp"]

MAX_SLOTS = 4  # the shader's slots


@dataclass(frozen=True)
class MatMulNBitsGroupOp(OperatorBase):
    gated: bool = False
    name: str = "MatMulNBitsGroup"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        slots = _slots(ctx, self.gated)
        layout = _layout(ctx, slots)
        dims = ctx.input_dims(A)[:-1]
        _check_quantized_a(ctx, slots, dims, layout)
        return [TensorType(ctx.input_dtype(A), shape_of([*dims, s.n])) for s in slots[: 1 if self.gated else None]]

    def plan(self, ctx: PlanCtx) -> None:
        slots = _slots(ctx, self.gated)
        activation = gate_activation(ctx) if self.gated else None
        given = None
        if _quantized_a(ctx):
            given = (ctx.input(4 * len(slots) + 1), ctx.input(4 * len(slots) + 2))
        plan_products(ctx, _layout(ctx, slots), slots, activation, quantized_a=given)


def _quantized_a(ctx: NodeCtx) -> bool:
    return ctx.attr_int("quantized_a", 0) == 1


def _check_quantized_a(ctx: NodeCtx, slots: list[Slot], rows: tuple, layout: Layout) -> None:
    """With quantized_a, inputs qa and sa after the weights, typed as `int8_activations` lays them out."""
    if not _quantized_a(ctx):
        return
    expected = quantized_a_types(tuple(rows), layout.k, layout.block_size)
    for offset, (role, want) in enumerate(zip(("qa", "sa"), expected), start=4 * len(slots) + 1):
        if not ctx.has_input(offset):
            raise ctx.error(f"attribute quantized_a = 1 but input {offset} ({role}) is absent")
        dims, found, want_dims = ctx.input_dims(offset), ctx.input_dtype(offset), _dims_of(want)
        if found != want.dtype or len(dims) != len(want_dims):
            raise ctx.error(
                f"input {offset} ({role}) is {found.name.lower()} {list(dims)}; expected "
                f"{want.dtype.name.lower()} {list(want_dims)}"
            )


def _dims_of(tensor: TensorType) -> tuple:
    shape = tensor.shape
    return () if isinstance(shape, Absent) else tuple(shape.dims)


def _layout(ctx: NodeCtx, slots: list[Slot]) -> Layout:
    """With attribute quant_type the weights are grouped MatMulBnb4's (B, absmax): code-table nibbles."""
    layout = nbits_layout(ctx, slots)
    if ctx.attr("quant_type") is None:
        return layout
    return replace(layout, zero_points="zero", codebook=codebook_literals(ctx, ctx.attr_int("quant_type")))


def _slots(ctx: NodeCtx, gated: bool) -> list[Slot]:
    ns = ctx.attr_ints("N")
    if not 1 <= len(ns) <= MAX_SLOTS or (gated and (len(ns) != 2 or ns[0] != ns[1])):
        raise ctx.error(f"attribute N = {ns}; expected {'two equal counts' if gated else f'1 to {MAX_SLOTS} counts'}")
    if _quantized_a(ctx) and ctx.num_inputs != 3 + 4 * len(ns):
        raise ctx.error(
            f"has {ctx.num_inputs} inputs; with quantized_a expected 3 + 4 * {len(ns)} (A, four per weight, qa, sa)"
        )
    if not _quantized_a(ctx) and ctx.num_inputs > 1 + 4 * len(ns):
        raise ctx.error(
            f"has {ctx.num_inputs} inputs; expected at most 1 + 4 * {len(ns)} (A, then B, scales, zero_points, bias per weight)"
        )
    slots = group_slots(ns)
    if gated and any(ctx.has_input(s.bias) for s in slots):
        raise ctx.error("a gated product takes no bias")
    return slots


MATMUL_NBITS_GROUP: dict[str, MatMulNBitsGroupOp] = {
    "MatMulNBitsGroup": MatMulNBitsGroupOp(),
    "GatedMatMulNBits": MatMulNBitsGroupOp(gated=True, name="GatedMatMulNBits"),
}
