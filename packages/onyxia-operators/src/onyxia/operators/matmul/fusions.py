"""Rewrite rules that produce this family's com.onyxia kernels: MatMulTransB, MatMulGroup, GatedMatMul.

- ``fold_transpose_into_matmul``: ``MatMul(x, Transpose(w))`` swapping the last two axes becomes
  ``MatMulTransB(x, w)``. Targets tied lm heads (optimum's Gemma 3: ``MatMul(h, Transpose(embed,
  perm=[1, 0]))``): the 262144 x 640 table is far over the fold limit, so without it the transpose
  runs every step and keeps a second 671 MB copy alive.
- ``group_matmuls``: default-domain MatMuls reading the same A (rank >= 2, float) at input 0, each B a
  static 2-D [K, N] of A's dtype that fits one storage binding, become one MatMulGroup: one dispatch for
  a layer's q/k/v (or gate/up) instead of three (two), each weight still its own binding. Biased MatMuls
  (MatMulGroups of one made by `bias_fusions`, Qwen2's q/k/v) group alike into one biased MatMulGroup.
- ``fuse_gelu_mul_into_group``: ``Mul(Gelu(g), u)`` over the two outputs of a two-weight group (either
  operand order) becomes GatedMatMul, so neither product is stored (Gemma's MLP). The rule for
  MatMulNBitsGroup (`onyxia.operators.quantized.fusions`) shares the pattern.
- ``fuse_silu_mul_into_group``: the same with SiLU, ``Mul(Mul(g, Sigmoid(g)), u)`` (each Mul either order):
  GatedMatMul with ``activation="silu"`` (the SiLU-gated MLP of Llama, Qwen2/3, Mistral, Phi-3).

Declines (reason logged, graph unchanged): a Transpose that permutes more than the last two axes, or a 2-D one
folded at compile time from a computed weight nothing else reads (a dequantized one: the folded copy, as
panels, is faster, and no second copy stays alive);
a group member whose weight is computed after the first member (the group takes the first's place);
a gate, up projection or activation with other uses (`gate_check` names it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onyxia.core import IrGraph, IrNode, max_binding_bytes
from onyxia.core.rewrite import Attr, Decline, Match, NewValue, Rewriter, Rule, Siblings, Var, is_folded, op
from onyxia.core.rewrite.match import private_outputs
from onyxia.core.rewrite.patterns import OpPattern, Ops
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.matmul.matmul_group import MAX_SLOTS
from onyxia.operators.typesets import FLOATS

__all__ = [
    "MATMUL_FUSIONS",
    "MAX_BINDINGS",
    "GELU",
    "SILU",
    "gate_attributes",
    "gate_check",
    "gate_pattern",
    "gate_slots",
    "group_fits",
    "group_outputs",
    "weight_product",
    "weights_ready",
]

# Storage buffers one grouped dispatch may bind. lavapipe allows 48 and native Vulkan, Metal and D3D12
# adapters at least 31; 16 keeps a q/k/v MatMulNBits group (11 at accuracy_level 4) on every one of them.
MAX_BINDINGS = 16


def _not_folded(graph: IrGraph, node: IrNode) -> bool:
    return not is_folded(graph, node)


# ----- fold_transpose_into_matmul ---------------------------------------------------------------
def _swaps_last_two(graph: IrGraph, m: Match) -> Decline | None:
    rank = len(graph.tensor(m.w).dims)
    perm = list(range(rank - 1, -1, -1)) if m.perm is None else [int(p) for p in m.perm]  # ONNX default: reverse
    if rank < 2 or perm != [*range(rank - 2), rank - 1, rank - 2]:
        return Decline(f"perm {perm} is not a swap of the last two axes", m.node)
    computed = graph.tensor(m.w).initializer is None  # a weight computed at compile time (a dequantization)
    if rank == 2 and computed and is_folded(graph, m.transpose) and len(graph.tensor_consumers(m.w)) == 1:
        return Decline(
            "the transposed weight is folded from a computed one nothing else reads: MatMul takes it as panels"
        )
    return None


FOLD_TRANSPOSE_INTO_MATMUL = Rule(
    "fold_transpose_into_matmul",
    op.MatMul(Var("x"), op.Transpose(Var("w"), perm=Attr("perm", None), _name="transpose"), _where=_not_folded),
    lambda r, m: [r.op("MatMulTransB", m.x, m.w, domain=ONYXIA_DOMAIN)],
    check=_swaps_last_two,
    targets="optimum Gemma 3 tied lm head: MatMul(h, Transpose(embed_tokens, perm=[1, 0]))",
)


# ----- group_matmuls ------------------------------------------------------------------------------
def _float_key(graph: IrGraph, node: IrNode) -> str | None:
    """Members share the op and bias presence (a MatMul with its bias folded in is a biased MatMulGroup of one,
    `bias_fusions`); None when `node` cannot join a MatMulGroup."""
    if node.domain == ONYXIA_DOMAIN:
        one = node.attributes.get("bias", 0) == 1 and len(node.inputs) == 3 and len(node.outputs) == 1
        return "float-bias" if one and weight_product(graph, node) else None
    return "float" if weight_product(graph, node) else None


def weight_product(graph: IrGraph, node: IrNode) -> bool:
    """`node` (inputs a, w) multiplies a float a of rank >= 2 by a static 2-D [K, N] w of a's dtype that fits one
    storage binding: what MatMulGroup computes (and plans a MatMul by a weight as)."""
    a, b = node.inputs[0], node.inputs[1]
    if a is None or b is None or is_folded(graph, node):
        return False
    at, bt = graph.tensor(a), graph.tensor(b)
    if isinstance(at.shape, Absent) or isinstance(bt.shape, Absent) or len(at.shape.dims) < 2:
        return False
    if at.dtype not in FLOATS or bt.dtype != at.dtype:
        return False
    dims = bt.shape.dims
    if len(dims) != 2 or not all(isinstance(d, int) for d in dims) or dims[0] != at.shape.dims[-1]:
        return False
    size = dims_product(dims)
    # over one storage binding: MatMul splits it
    return isinstance(size, int) and size * bt.dtype.gpu_numpy.itemsize <= max_binding_bytes()


def _float_fits(members: list[IrNode]) -> bool:
    """A weight and an output per member, a bias too when biased, and the shared a."""
    return group_fits(3 if members[0].domain == ONYXIA_DOMAIN else 2, 1)(members)


def group_fits(bindings_per_weight: int, fixed: int) -> Callable[[list[IrNode]], bool]:
    """`fits` for `Siblings`: at most `MAX_SLOTS` weights and `MAX_BINDINGS` storage bindings."""
    return lambda members: len(members) <= MAX_SLOTS and fixed + bindings_per_weight * len(members) <= MAX_BINDINGS


def weights_ready(graph: IrGraph, m: Match) -> Decline | None:
    """The group takes the first member's place: every weight must be computed before it."""
    first = graph.order_key(m.node)
    for member in m.members[1:]:
        for t in member.inputs[1:]:
            producer = None if t is None else graph.tensor_producer(t)
            if producer is not None and graph.order_key(producer) > first:
                return Decline("a weight is computed after the first member, where the group would sit", member)
    return None


def group_outputs(r: Rewriter, m: Match, group: NewValue) -> dict[int, NewValue]:
    """Each member's product becomes the group's output in the member's slot."""
    pairs = zip(m.members, r.outputs_of(group), strict=True)
    return {t: out for n, out in pairs if (t := n.outputs[0]) is not None}


def _group(r: Rewriter, m: Match) -> dict[int, NewValue]:
    weights = [n.inputs[1] for n in m.members]
    biased = m.node.domain == ONYXIA_DOMAIN
    biases = [n.inputs[2] for n in m.members] if biased else []
    attrs: dict[str, Any] = {"bias": 1} if biased else {}
    group = r.op(
        "MatMulGroup", m.node.inputs[0], *weights, *biases, domain=ONYXIA_DOMAIN, outputs=len(weights), **attrs
    )
    return group_outputs(r, m, group)


GROUP_MATMULS = Rule(
    "group_matmuls",
    Siblings(frozenset({("", "MatMul"), (ONYXIA_DOMAIN, "MatMulGroup")}), _float_key, _float_fits),
    _group,
    check=weights_ready,
    targets="onnx-community Gemma fp32: q/k/v and gate/up MatMuls of one normed hidden state",
)


# ----- fuse_gelu_mul_into_group, fuse_silu_mul_into_group ---------------------------------------
GELU = op.Gelu(Var("gate"), _name="gelu", _shared=True, approximate=Attr("approximate", "none"))
# SiLU as exporters spell it (onnxruntime-genai's builder and optimum alike): Mul(g, Sigmoid(g)), either order
SILU = op.Mul(Var("gate"), op.Sigmoid(Var("gate"), _name="sigmoid", _shared=True), _commute=True, _shared=True)


def gate_pattern(group_op: str, activation: OpPattern = GELU) -> OpPattern:
    """``Mul(activation(one group output), the group's other output)``, either operand order. The group and
    the activation's nodes are `_shared` so that `gate_check` can say which of them has another use."""
    up = Ops(ONYXIA_DOMAIN).any_of(
        (group_op,), _name="group", _output=None, _extra_inputs=True, _shared=True, _where=_plain_pair
    )
    return op.Mul(activation, up, _commute=True)


def _plain_pair(graph: IrGraph, node: IrNode) -> bool:
    """Two outputs, and no bias (a biased MatMulGroup's epilogue is not the gated kernel's)."""
    return len(node.outputs) == 2 and None not in node.outputs and not node.attributes.get("bias", 0)


def gate_check(graph: IrGraph, m: Match) -> Decline | None:
    """The gate is the group's other product, and nothing outside the match reads the group or the
    activation: else they would be computed twice (the gated kernel stores neither)."""
    up = m.group.outputs[m.group_output]
    if m.gate not in m.group.outputs or m.gate == up:
        return Decline("the activation does not read the group's other product", m.node)
    members = {n.id for n in m.nodes}
    for node in m.nodes[1:]:
        if not private_outputs(graph, node, members):
            return Decline(f"'{node.name}' ({node.op_type}) has a use outside the gated MLP", node)
    return None


def gate_slots(m: Match) -> list[int]:
    """[gate slot, up slot] of the group."""
    gate = m.group.outputs.index(m.gate)
    return [gate, 1 - gate]


def gate_attributes(m: Match) -> dict[str, Any]:
    """The gated op's activation attributes: Gelu's `approximate`, or ``activation="silu"``."""
    return {"approximate": m.approximate} if hasattr(m, "gelu") else {"activation": "silu"}


def _gated(r: Rewriter, m: Match) -> list[NewValue]:
    inputs = [m.group.inputs[0], *(m.group.inputs[1 + s] for s in gate_slots(m))]
    return [r.op("GatedMatMul", *inputs, domain=ONYXIA_DOMAIN, **gate_attributes(m))]


FUSE_MLP_GATE = Rule(
    "fuse_gelu_mul_into_MatMulGroup",
    gate_pattern("MatMulGroup"),
    _gated,
    check=gate_check,
    targets="onnx-community Gemma: Mul(Gelu(x @ W_gate, approximate='tanh'), x @ W_up)",
)

FUSE_SILU_GATE = Rule(
    "fuse_silu_mul_into_MatMulGroup",
    gate_pattern("MatMulGroup", SILU),
    _gated,
    check=gate_check,
    targets="Llama, Qwen2, Qwen3, Mistral, Phi-3 (genai fp32, optimum): Mul(Mul(g, Sigmoid(g)), x @ W_up), g = x @ W_gate",
)

MATMUL_FUSIONS = (FOLD_TRANSPOSE_INTO_MATMUL, GROUP_MATMULS, FUSE_MLP_GATE, FUSE_SILU_GATE)
