"""Rewrite rules for onnxruntime ``quantize_dynamic``'s 8-bit products (the onnx-community ``_int8`` / ``_uint8``
files), after ``fuse_cast_mul_into_MatMulInteger`` (`quantized.fusions`) has made them MatMulIntegerToFloat:

- ``fuse_dynamic_quantize_into_MatMulIntegerToFloat``: ``MatMulIntegerToFloat(q, W, s, sW, z, zW, bias)`` whose
  q, s and z are the three outputs of one ``DynamicQuantizeLinear(x)`` becomes com.microsoft
  ``DynamicQuantizeMatMul(x, W, sW, zW, bias)``, onnxruntime's own fusion: the op quantizes x itself, so the
  DynamicQuantizeLinear dispatch and its uint8 copy of x go (once its last product is rewritten; the q/k/v
  products of one quantized x are rewritten one by one). Declines a B that is not 2-D [K, N] with a static N.
- ``group_dynamic_quantize_matmul``: DynamicQuantizeMatMul nodes reading the same x, with compile-time weights of
  one dtype and alike in zero point and bias (present or not, per tensor or per column), become one
  DynamicQuantizeMatMulGroup: one dispatch for q/k/v (or gate/up), A quantized once per workgroup for all.
- ``fuse_gelu_mul_into_DynamicQuantizeMatMulGroup`` / ``fuse_silu_mul_into_DynamicQuantizeMatMulGroup``: the
  gated MLP of `onyxia.operators.matmul.fusions` over a two-weight group, GatedDynamicQuantizeMatMul (no bias).

The group and gate rules reuse the MatMulNBits ones' machinery (`slot_group`, `gated_slots`, `gate_without_bias`):
both groups lay their inputs out as A, then (B, scale, zero point, bias) per weight.
"""

from __future__ import annotations

from collections.abc import Hashable

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import Decline, Match, NewValue, Rewriter, Rule, Siblings, Var, is_folded, ms, op
from onyxia.core.rewrite.patterns import OpPattern
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.matmul.fusions import SILU, gate_pattern, group_fits, weights_ready
from onyxia.operators.quantized.fusions import gate_without_bias, gated_slots, slot_group

__all__ = ["INTEGER_GATE_FUSIONS", "INTEGER_GROUP_FUSIONS", "INTEGER_QUANTIZE_FUSIONS"]

_MS = "com.microsoft"
_GROUP = "DynamicQuantizeMatMulGroup"
_PARAMS = 3  # bindings every group has: A, and the scale and zero point a prefill dispatch computes


# ----- fuse_dynamic_quantize_into_MatMulIntegerToFloat ---------------------------------------------
def _quantized(output: int) -> OpPattern:
    """Output `output` of the DynamicQuantizeLinear of x (shared: q/k/v read one)."""
    return op.DynamicQuantizeLinear(Var("x"), _name="quantize", _output=output, _shared=True)


def _weight_2d(graph: IrGraph, m: Match) -> Decline | None:
    shape = graph.tensor(m.b).shape
    dims = None if isinstance(shape, Absent) else list(shape.dims)
    if dims is None or len(dims) != 2 or not isinstance(dims[1], int):
        return Decline(f"B has dims {dims}; DynamicQuantizeMatMul takes a 2-D B [K, N] with a static N", m.b)
    return None


def _dynamic(r: Rewriter, m: Match) -> list[NewValue]:
    inputs = [m.x, m.b, m.b_scale, *m.product.inputs[5:7]]
    while inputs[-1] is None:
        inputs.pop()
    return [r.op("DynamicQuantizeMatMul", *inputs, domain=_MS)]


FUSE_DYNAMIC_QUANTIZE_INTO_MATMUL_INTEGER_TO_FLOAT = Rule(
    "fuse_dynamic_quantize_into_MatMulIntegerToFloat",
    ms.MatMulIntegerToFloat(
        _quantized(0), Var("b"), _quantized(1), Var("b_scale"), _quantized(2), _name="product", _extra_inputs=True
    ),
    _dynamic,
    check=_weight_2d,
    targets="onnxruntime quantize_dynamic (onnx-community int8/uint8): MatMulIntegerToFloat(DynamicQuantizeLinear(x))",
)


# ----- group_dynamic_quantize_matmul ----------------------------------------------------------------
def _slot(node: IrNode) -> list[int | None]:
    """B, b_scale, b_zero_point, bias of a DynamicQuantizeMatMul (empty ones None)."""
    return [node.inputs[i] if i < len(node.inputs) else None for i in range(1, 5)]


def _columns(graph: IrGraph, t: int | None) -> str:
    return "none" if t is None else ("tensor" if dims_product(graph.tensor(t).dims) == 1 else "columns")


def _key(graph: IrGraph, node: IrNode) -> Hashable | None:
    """What a group shares; None when `node` cannot join one (its weight is not compile-time data: the group's
    kernel reads every weight repacked)."""
    b, scale, zero_point, bias = _slot(node)
    if node.inputs[0] is None or b is None or is_folded(graph, node):
        return None
    weight = graph.tensor(b)
    if weight.initializer is None and weight.value is None:
        return None
    return weight.dtype, _columns(graph, scale), _columns(graph, zero_point), bias is not None


def _fits(members: list[IrNode]) -> bool:
    """B, b_scale, the zero point and bias when present, and an output per weight; A and its parameters."""
    per_weight = 3 + sum(t is not None for t in _slot(members[0])[2:])
    return group_fits(per_weight, _PARAMS)(members)


def _group(r: Rewriter, m: Match) -> dict[int, NewValue]:
    return slot_group(r, m, _GROUP, [_slot(member) for member in m.members])


GROUP_DYNAMIC_QUANTIZE_MATMUL = Rule(
    "group_dynamic_quantize_matmul",
    Siblings(frozenset({(_MS, "DynamicQuantizeMatMul")}), _key, _fits),
    _group,
    check=weights_ready,
    targets="onnx-community Gemma int8/uint8: q/k/v and gate/up DynamicQuantizeMatMul of one normed hidden state",
)


# ----- fuse_{gelu,silu}_mul_into_DynamicQuantizeMatMulGroup ------------------------------------------
_GATED = gated_slots("GatedDynamicQuantizeMatMul")

FUSE_MLP_GATE_DYNAMIC = Rule(
    "fuse_gelu_mul_into_DynamicQuantizeMatMulGroup",
    gate_pattern(_GROUP),
    _GATED,
    check=gate_without_bias,
    targets="onnx-community Gemma int8/uint8: Mul(Gelu(x @ W_gate, approximate='tanh'), x @ W_up), 8-bit weights",
)

FUSE_SILU_GATE_DYNAMIC = Rule(
    "fuse_silu_mul_into_DynamicQuantizeMatMulGroup",
    gate_pattern(_GROUP, SILU),
    _GATED,
    check=gate_without_bias,
    targets="Llama, Qwen2/3, Phi-3 int8/uint8 (onnx-community quantize_dynamic): Mul(Mul(g, Sigmoid(g)), u)",
)

INTEGER_QUANTIZE_FUSIONS = (FUSE_DYNAMIC_QUANTIZE_INTO_MATMUL_INTEGER_TO_FLOAT,)  # FuseMatMulBias
INTEGER_GROUP_FUSIONS = (GROUP_DYNAMIC_QUANTIZE_MATMUL,)  # GroupMatMuls
INTEGER_GATE_FUSIONS = (FUSE_MLP_GATE_DYNAMIC, FUSE_SILU_GATE_DYNAMIC)  # FuseMlpGate
