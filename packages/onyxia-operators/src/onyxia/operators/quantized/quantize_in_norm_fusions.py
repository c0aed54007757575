"""``quantize_a_in_norm``: a norm feeding a 4-bit product that runs int8 activations writes A quantized itself.

At accuracy_level 4 a MatMulNBits product quantizes each row of A to int8 per block first (onnxruntime's CompInt8,
`int8_activations`). A batched decode step or a prefill did that in a dispatch of its own before every group;
the decoder's pre-attention and pre-MLP norms (the q/k/v and gate/up groups' A) hold each row's values when they
write them, so the norm's com.onyxia ``<norm>Int8A`` twin quantizes them there, into the layout the product
reads, and the product (``quantized_a`` = 1) reads them: one dispatch less per group at M > 1 (Qwen2-0.5B's
8-row step: 48 of its 97 quantize dispatches), and a decode workgroup no longer quantizes its row. The values
are the ones the product would have computed (onyxia::quant on the stored y), so the outputs keep their bits.

Matches ``MatMulNBitsGroup(norm(...), ...)``, ``GatedMatMulNBits(norm(...), ...)`` and a com.microsoft
``MatMulNBits(norm(...), ...)`` (genai's packed q/k/v projection: it becomes a one-weight MatMulNBitsGroup, the
same kernel) where norm is one of the layer-norm rows (LayerNormalization, SimplifiedLayerNormalization,
RMSNormalization, the com.microsoft Skip* norms, com.onyxia NormAddNorm) normalising the last axis, its y the
product's A. Declines: the product does not run int8 activations (accuracy_level other than 4, block_size over
256, float zero points, bnb4 weights, weights not constant, g_idx), the norm is over more than the last axis or
its row is not K long.
"""

from __future__ import annotations

from onyxia.core import DataType, IrGraph, IrNode
from onyxia.core.rewrite import Attr, Decline, Match, NewValue, OpPattern, Ops, Rewriter, Rule, is_folded, ms
from onyxia.core.shapes import Absent
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.normalization.layer_norm import LAYER_NORMS, LAYER_NORMS_MS, LAYER_NORMS_ONYXIA
from onyxia.operators.quantized.int8_activations import int8_activations
from onyxia.operators.quantized.matmul_nbits_layout import SINGLE

__all__ = ["QUANTIZE_IN_NORM_FUSIONS"]

_GROUPS = ("MatMulNBitsGroup", "GatedMatMulNBits")
_NORMS_BY_DOMAIN = {
    "": tuple(LAYER_NORMS),
    "com.microsoft": tuple(LAYER_NORMS_MS),
    ONYXIA_DOMAIN: tuple(name for name in LAYER_NORMS_ONYXIA if f"{name}Int8A" in LAYER_NORMS_ONYXIA),
}
_NORM_ROWS = {**LAYER_NORMS, **LAYER_NORMS_MS, **LAYER_NORMS_ONYXIA}


def _pattern(domain: str, products: Ops, op_types: tuple[str, ...]) -> OpPattern:
    # _shared: the norm's other outputs (a Skip* norm's sum, the next residual) are read elsewhere
    norm = Ops(domain).any_of(
        _NORMS_BY_DOMAIN[domain], _name="norm", _shared=True, _extra_inputs=True, axis=Attr("axis", -1)
    )
    return products.any_of(
        op_types, norm, _extra_inputs=True, _where=lambda g, n: n.attributes.get("quantized_a", 0) != 1
    )


def _slots(node: IrNode) -> list[list[int | None]]:
    """The product's weights, four inputs each (B, scales, zero_points, bias; absent ones None)."""
    inputs = [*node.inputs, *[None] * 6]
    if node.domain == "com.microsoft":
        return [[inputs[i] for i in SINGLE]]
    return [inputs[1 + 4 * s : 5 + 4 * s] for s in range(len(node.attributes["N"]))]


def _zero_points(graph: IrGraph, slots: list[list[int | None]]) -> str:
    zp = slots[0][2]
    if zp is None:
        return "none"
    return "packed" if graph.tensor(zp).dtype == DataType.UINT8 else "float"


def _check(graph: IrGraph, m: Match) -> Decline | None:
    product, norm = m.node, m.norm
    if is_folded(graph, norm):
        return Decline("the norm is folded", norm)
    attrs = product.attributes
    if "quant_type" in attrs:
        return Decline("bnb4 weights multiply in f32", product)
    if product.domain == "com.microsoft" and len(product.inputs) > 4 and product.inputs[4] is not None:
        return Decline("g_idx (act-order) is not a MatMulNBitsGroup weight", product)
    slots = _slots(product)
    weights = [slot[0] for slot in slots if slot[0] is not None]
    known = all(graph.tensor(t).initializer is not None or graph.tensor(t).value is not None for t in weights)
    k, block = int(attrs.get("K", 0)), int(attrs.get("block_size", 0))
    if not int8_activations(int(attrs.get("accuracy_level", 0)), block, _zero_points(graph, slots), known):
        return Decline("the product does not quantize A to int8 (accuracy_level 4, CompInt8's block sizes)", product)
    shape = graph.tensor(product.inputs[0]).shape
    if isinstance(shape, Absent) or not shape.dims:
        return Decline("A's shape is unknown", product)
    rank = len(shape.dims)
    if m.axis not in (-1, rank - 1) or shape.dims[-1] != k:
        return Decline(f"the norm's rows (axis {m.axis} of {shape}) are not the product's K = {k}", norm)
    return None


def _rewrite(r: Rewriter, m: Match) -> dict[int, NewValue]:
    product, norm = m.node, m.norm
    own = len(_NORM_ROWS[norm.op_type].outputs)
    twin = r.op(
        f"{norm.op_type}Int8A",
        *norm.inputs,
        domain=ONYXIA_DOMAIN,
        outputs=own + 2,
        **norm.attributes,
        a_block_size=int(product.attributes["block_size"]),
    )
    twin_outputs = r.outputs_of(twin)
    attrs = dict(product.attributes)
    if product.domain == "com.microsoft":  # one weight: a one-slot group, N a list
        attrs["N"] = [int(attrs["N"])]
    reader = r.op(
        "MatMulNBitsGroup" if product.domain == "com.microsoft" else product.op_type,
        product.inputs[0],
        *(t for slot in _slots(product) for t in slot),
        twin_outputs[own],
        twin_outputs[own + 1],
        domain=ONYXIA_DOMAIN,
        outputs=len(product.outputs),
        **attrs,
        quantized_a=1,
    )
    replacement = {old: new for old, new in zip(norm.outputs, twin_outputs) if old is not None}
    replacement |= {old: new for old, new in zip(product.outputs, r.outputs_of(reader)) if old is not None}
    return replacement


_NORM_DOMAINS = (("", ""), ("com.microsoft", "_ms"), (ONYXIA_DOMAIN, "_onyxia"))

QUANTIZE_IN_NORM_FUSIONS = (
    *(
        Rule(
            f"quantize_a_in_norm{suffix}",
            _pattern(domain, Ops(ONYXIA_DOMAIN), _GROUPS),
            _rewrite,
            check=_check,
            targets="int4 decoders at accuracy_level 4 (genai, onnx-community q4): the pre-attention / pre-MLP norm "
            "before the q/k/v and gate/up groups",
        )
        for domain, suffix in _NORM_DOMAINS
    ),
    *(
        Rule(
            f"quantize_a_in_norm_for_matmul_nbits{suffix}",
            _pattern(domain, ms, ("MatMulNBits",)),
            _rewrite,
            check=_check,
            targets="genai int4 (Qwen2, Llama, Mistral, Phi-3): the input norm before the packed q/k/v MatMulNBits",
        )
        for domain, suffix in _NORM_DOMAINS
    ),
)
