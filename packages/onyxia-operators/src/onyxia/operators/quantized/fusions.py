"""Rewrite rules that produce this family's com.onyxia kernels: MatMulNBitsGroup and GatedMatMulNBits.

- ``group_matmul_nbits``: com.microsoft MatMulNBits reading the same A with equal K, bits, block_size,
  accuracy_level, zero-point form (none, packed uint8, float) and bias presence, no g_idx, and every
  weight input a compile-time constant (the shader reads them repacked), become one MatMulNBitsGroup:
  one dispatch, and at accuracy_level 4 the activation is quantized once instead of per weight.
  com.microsoft MatMulBnb4 siblings (equal K, block_size dividing K, quant_type) group the same way, into
  a MatMulNBitsGroup with attribute quant_type (B and absmax per weight; see `matmul_bnb4`).
- ``fuse_gelu_mul_into_MatMulNBitsGroup``: the gated MLP of `onyxia.operators.matmul.fusions` over a
  two-weight MatMulNBitsGroup. Declines when the projections have bias (the gated kernel adds none).
- ``fuse_silu_mul_into_MatMulNBitsGroup``: the same with SiLU, ``Mul(Mul(g, Sigmoid(g)), u)``.
- ``fuse_cast_mul_into_MatMulInteger``: onnxruntime ``quantize_dynamic``'s ``Mul(Cast(MatMulInteger(q, W, zq,
  zW), to=float), Mul(a_scale, b_scale))`` becomes com.microsoft MatMulIntegerToFloat (what onnxruntime's own
  optimizer makes of it), whose epilogue does the Cast and both Muls in the graph's float order: the int32
  product never goes to memory. Declines on non-f32 scales, or a scale that is not per tensor / per column.
- ``fold_add_into_MatMulNBits``: ``Add(MatMulNBits(x, ...), b)``, b a constant [N], becomes MatMulNBits with its
  native bias input, so no Add dispatch remains (run before grouping: biased q/k/v then group together).
  Declines on float16, where the kernel's one rounding differs from the graph's two.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from onyxia.core import DataType, IrGraph, IrNode
from onyxia.core.rewrite import Const, Decline, Match, NewValue, Rewriter, Rule, Siblings, Var, is_folded, ms, op
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.matmul.bias_fusions import bias_fits
from onyxia.operators.matmul.fusions import (
    MAX_BINDINGS,
    SILU,
    gate_attributes,
    gate_check,
    gate_pattern,
    gate_slots,
    group_outputs,
    weights_ready,
)
from onyxia.operators.matmul.matmul_group import MAX_SLOTS

__all__ = ["FUSE_CAST_MUL_INTO_MATMUL_INTEGER", "QUANTIZED_FUSIONS", "gate_without_bias", "gated_slots", "slot_group"]

_NBITS_INPUTS = (1, 2, 3, 5)  # B, scales, zero_points, bias (4 is g_idx)


def _weights(node: IrNode) -> list[int | None]:
    return [node.inputs[i] if i < len(node.inputs) else None for i in _NBITS_INPUTS]


def _known(graph: IrGraph, t: int) -> bool:
    tensor = graph.tensor(t)
    return tensor.initializer is not None or tensor.value is not None


def _nbits_key(graph: IrGraph, node: IrNode) -> Hashable | None:
    """What a MatMulNBits group shares; None when `node` cannot join one."""
    if node.inputs[0] is None or is_folded(graph, node):
        return None
    if node.op_type == "MatMulBnb4":
        return _bnb4_key(graph, node)
    if len(node.inputs) > 4 and node.inputs[4] is not None:
        return None  # g_idx
    weights = _weights(node)
    if any(t is not None and not _known(graph, t) for t in weights):
        return None
    zp = weights[2]
    attrs = node.attributes
    return (
        attrs.get("K"),
        attrs.get("bits", 4),
        attrs.get("block_size"),
        attrs.get("accuracy_level", 0),
        "none" if zp is None else graph.tensor(zp).dtype.short,
        weights[3] is not None,
    )


def _bnb4_key(graph: IrGraph, node: IrNode) -> Hashable | None:
    """MatMulBnb4 joins a group of its own kind (attribute quant_type) when its blocks are MatMulNBits' (K a
    multiple of block_size: B is [N, K / block_size, block_size / 2] bytes, absmax the scales)."""
    attrs = node.attributes
    k, block_size = attrs.get("K"), attrs.get("block_size")
    if not isinstance(k, int) or not isinstance(block_size, int) or block_size <= 0 or k % block_size:
        return None
    if attrs.get("transB", 1) != 1 or graph.tensor(node.inputs[0]).dtype != DataType.FLOAT:
        return None
    if any(t is None or not _known(graph, t) for t in node.inputs[1:3]):
        return None
    return ("bnb4", k, block_size, attrs.get("quant_type"))


def _fits(members: list[IrNode]) -> bool:
    """Worst case over the kernels: A and its int8 scales, each weight's inputs, each output."""
    per_weight = sum(t is not None for t in _weights(members[0]))
    return len(members) <= MAX_SLOTS and 2 + (per_weight + 1) * len(members) <= MAX_BINDINGS


def slot_group(
    r: Rewriter, m: Match, op_type: str, slots: Sequence[Sequence[int | None]], **attrs: Any
) -> dict[int, NewValue]:
    """The members of `m` as one `op_type` node of slots: their shared A, then each member's weight inputs
    (`slots`, four each, empty ones None), one output per member."""
    inputs = [m.node.inputs[0], *(t for slot in slots for t in slot)]
    while inputs[-1] is None:
        inputs.pop()
    group = r.op(op_type, *inputs, domain=ONYXIA_DOMAIN, outputs=len(slots), **attrs)
    return group_outputs(r, m, group)


def _group(r: Rewriter, m: Match) -> dict[int, NewValue]:
    keys = ("K", "bits", "block_size", "accuracy_level", "quant_type")  # quant_type: MatMulBnb4 members
    attrs = {key: m.node.attributes[key] for key in keys if key in m.node.attributes}
    n = [int(member.attributes["N"]) for member in m.members]
    return slot_group(r, m, "MatMulNBitsGroup", [_weights(member) for member in m.members], N=n, **attrs)


GROUP_MATMUL_NBITS = Rule(
    "group_matmul_nbits",
    Siblings(frozenset({("com.microsoft", "MatMulNBits"), ("com.microsoft", "MatMulBnb4")}), _nbits_key, _fits),
    _group,
    check=weights_ready,
    targets="onnx-community q4 / bnb4, genai int4: q/k/v and gate/up 4-bit products of one normed hidden state",
)


def gate_without_bias(graph: IrGraph, m: Match) -> Decline | None:
    """`gate_check` for a group of slots (A, then four inputs per weight, the fourth its bias; every slot alike)."""
    if len(m.group.inputs) > 4 and m.group.inputs[4] is not None:
        return Decline("the projections have bias; the gated kernel adds none", m.group)
    return gate_check(graph, m)


def gated_slots(op_type: str) -> Callable[[Rewriter, Match], list[NewValue]]:
    """The rewrite of a two-weight group of slots (A, then four inputs per weight) into its gated `op_type`:
    the gate's slot first, the group's attributes kept (a per-weight `N` list reordered alike)."""

    def rewrite(r: Rewriter, m: Match) -> list[NewValue]:
        group = m.group
        slots = [group.inputs[1 + 4 * s : 5 + 4 * s] for s in gate_slots(m)]
        inputs = [group.inputs[0], *(t for slot in slots for t in [*slot, *[None] * (4 - len(slot))])]
        while inputs[-1] is None:
            inputs.pop()
        attrs = {**group.attributes, **gate_attributes(m)}
        if "N" in attrs:
            attrs["N"] = [attrs["N"][s] for s in gate_slots(m)]
        return [r.op(op_type, *inputs, domain=ONYXIA_DOMAIN, **attrs)]

    return rewrite


_gated = gated_slots("GatedMatMulNBits")

FUSE_MLP_GATE_NBITS = Rule(
    "fuse_gelu_mul_into_MatMulNBitsGroup",
    gate_pattern("MatMulNBitsGroup"),
    _gated,
    check=gate_without_bias,
    targets="onnx-community Gemma q4: Mul(Gelu(x @ W_gate, approximate='tanh'), x @ W_up), 4-bit weights",
)

FUSE_SILU_GATE_NBITS = Rule(
    "fuse_silu_mul_into_MatMulNBitsGroup",
    gate_pattern("MatMulNBitsGroup", SILU),
    _gated,
    check=gate_without_bias,
    targets="Llama, Qwen2, Qwen3, Mistral, Phi-3 int4 (genai, onnx-community q4): Mul(Mul(g, Sigmoid(g)), u)",
)


def _bias_foldable(graph: IrGraph, m: Match) -> Decline | None:
    product = m.product
    if len(product.inputs) > 5 and product.inputs[5] is not None:
        return Decline("the MatMulNBits has a bias already", product)
    if graph.tensor(m.a).dtype != DataType.FLOAT:
        # the kernel adds its bias before the one rounding to f16; the graph's Add rounds the product first
        return Decline("f16: MatMulNBits' bias input rounds once, the graph's Add after the stored product", product)
    return bias_fits(graph, m.bias, product.attributes.get("N"), product.outputs[0])


def _with_bias(r: Rewriter, m: Match) -> list[NewValue]:
    inputs = [*m.product.inputs[:5], *[None] * (5 - len(m.product.inputs)), m.bias]
    return [r.op("MatMulNBits", *inputs, domain="com.microsoft", **m.product.attributes)]


FOLD_ADD_INTO_MATMUL_NBITS = Rule(
    "fold_add_into_MatMulNBits",
    op.Add(ms.MatMulNBits(Var("a"), _name="product", _extra_inputs=True), Const("bias"), _commute=True),
    _with_bias,
    check=_bias_foldable,
    targets="Qwen2 int4 q/k/v biases: genai Add(MatMulNBits(x, W_qkv), b), onnx-community q4 one per projection",
)

QUANTIZED_FUSIONS = (GROUP_MATMUL_NBITS, FUSE_MLP_GATE_NBITS, FUSE_SILU_GATE_NBITS, FOLD_ADD_INTO_MATMUL_NBITS)


def _single(graph: IrGraph, t: int) -> bool:
    return all(d == 1 for d in graph.tensor(t).dims)


def _scales_fit(graph: IrGraph, m: Match) -> Decline | None:
    """The scale product is f32, one of its factors a single value (a_scale is per tensor), and broadcasting
    it leaves the product's shape (so it is per tensor or per column)."""
    if any(graph.tensor(s).dtype != DataType.FLOAT for s in (m.a_scale, m.b_scale)):
        return Decline("the scales are not float32", m.scales)
    if not (_single(graph, m.a_scale) or _single(graph, m.b_scale)):
        return Decline("neither scale is a single value (MatMulIntegerToFloat's a_scale is per tensor)", m.scales)
    product = list(graph.tensor(m.product.outputs[0]).dims)
    if list(graph.tensor(m.mul.outputs[0]).dims) != product:
        return Decline("the scale broadcasts the product to another shape", m.mul)
    scale = list(graph.tensor(m.b_scale if _single(graph, m.a_scale) else m.a_scale).dims)
    if not (all(d == 1 for d in scale) or (product and scale[-1] == product[-1] and all(d == 1 for d in scale[:-1]))):
        return Decline(f"the scale {scale} is neither per tensor nor per column", m.scales)
    return None


def _integer_to_float(r: Rewriter, m: Match) -> list[NewValue]:
    a_scale, b_scale = (m.a_scale, m.b_scale) if _single(r.graph, m.a_scale) else (m.b_scale, m.a_scale)
    inputs = [m.a, m.b, a_scale, b_scale, *m.product.inputs[2:4]]
    while inputs[-1] is None:
        inputs.pop()
    return [r.op("MatMulIntegerToFloat", *inputs, domain="com.microsoft")]


FUSE_CAST_MUL_INTO_MATMUL_INTEGER = Rule(
    "fuse_cast_mul_into_MatMulInteger",
    op.Mul(
        op.Cast(op.MatMulInteger(Var("a"), Var("b"), _name="product", _extra_inputs=True), to=int(DataType.FLOAT)),
        op.Mul(Var("a_scale"), Var("b_scale"), _name="scales"),
        _commute=True,
        _name="mul",
    ),
    _integer_to_float,
    check=_scales_fit,
    targets="onnxruntime quantize_dynamic (onnx-community int8/uint8): Mul(Cast(MatMulInteger(q, W)), Mul(sa, sb))",
)
