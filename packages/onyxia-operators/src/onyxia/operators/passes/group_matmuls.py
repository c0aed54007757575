"""`GroupMatMuls`: products of one activation by several weights become one com.onyxia group node.

A decoder layer multiplies its normed hidden state by q, k and v (and, later, gate and up) weights: three
(two) GEMV dispatches per decode step, each paying lavapipe's fixed per-dispatch cost, and at
MatMulNBits accuracy_level 4 each quantizing the same activation. Grouped, they are one dispatch
(`MatMulGroup`, `MatMulNBitsGroup`: each workgroup computes columns of one weight), the activation is
quantized once, and every weight stays its own tensor and binding (no concatenated copy).

Two rules, one per family, anchored on the first member in graph order:
- ``group_matmuls``: default-domain MatMuls reading the same A (rank >= 2, float) at input 0, each B a 2-D
  [K, N] of A's dtype that fits one storage binding (a bigger one is left to MatMul, which splits it);
- ``group_matmul_nbits``: com.microsoft MatMulNBits reading the same A with equal K, bits, block_size,
  accuracy_level, zero-point form (none, packed uint8, float) and bias presence, no g_idx, and every weight
  input a compile-time constant (the shader reads them repacked).

A group has at most 4 weights (the shader's slots) and binds at most `MAX_BINDINGS` storage buffers; the
rest of the siblings form the next group. Declines (reason logged, graph unchanged) when a weight is
produced after the first member (the group node takes the first member's place). MatMuls that match no
sibling, and folded ones, are left alone silently.
"""

from __future__ import annotations

from collections.abc import Callable

from onyxia.core import IrGraph, IrNode, max_binding_bytes
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.matmul import MAX_SLOTS
from onyxia.operators.passes.rewrite import Decline, Match, RewritePass, Rule, is_folded
from onyxia.operators.typesets import FLOATS

__all__ = ["GROUP_MATMUL_RULES", "MAX_BINDINGS", "GroupMatMuls"]

# Storage buffers one grouped dispatch may bind. lavapipe allows 48 and native Vulkan, Metal and D3D12
# adapters at least 31; 16 keeps a q/k/v MatMulNBits group (11 at accuracy_level 4) on every one of them.
MAX_BINDINGS = 16
_MICROSOFT = "com.microsoft"
_NBITS_INPUTS = (1, 2, 3, 5)  # B, scales, zero_points, bias (4 is g_idx)


# ----- members ------------------------------------------------------------------------------
def _float_member(graph: IrGraph, node: IrNode) -> str | None:
    """Why `node` cannot join a MatMulGroup (None: it can)."""
    a, b = node.inputs[0], node.inputs[1]
    if a is None or b is None or is_folded(graph, node):
        return "an operand is absent or the product is folded"
    at, bt = graph.tensor(a), graph.tensor(b)
    if isinstance(at.shape, Absent) or isinstance(bt.shape, Absent) or len(at.shape.dims) < 2:
        return "A must have rank >= 2"
    if at.dtype not in FLOATS or bt.dtype != at.dtype:
        return f"A is {at.dtype.short} and B {bt.dtype.short}; both must be one float dtype"
    dims = bt.shape.dims
    if len(dims) != 2 or not all(isinstance(d, int) for d in dims) or dims[0] != at.shape.dims[-1]:
        return f"B has shape {bt.shape}; expected a static [K, N] weight"
    if dims_product(dims) * bt.dtype.gpu_numpy.itemsize > max_binding_bytes():  # type: ignore[operator]
        return "B exceeds one storage binding (MatMul splits it)"
    return None


def _nbits_key(graph: IrGraph, node: IrNode) -> tuple | str:
    """What a MatMulNBits group shares (or why `node` cannot join one)."""
    if node.inputs[0] is None or is_folded(graph, node):
        return "A is absent or the product is folded"
    if len(node.inputs) > 4 and node.inputs[4] is not None:
        return "g_idx is set"
    present = [node.inputs[i] if i < len(node.inputs) else None for i in _NBITS_INPUTS]
    if any(t is not None and not _constant(graph, t) for t in present):
        return "a weight input is not a compile-time constant"
    zp = present[2]
    form = "none" if zp is None else graph.tensor(zp).dtype.short
    attrs = node.attributes
    return (
        attrs.get("K"),
        attrs.get("bits", 4),
        attrs.get("block_size"),
        attrs.get("accuracy_level", 0),
        form,
        present[3] is not None,
    )


def _constant(graph: IrGraph, t: int) -> bool:
    tensor = graph.tensor(t)
    return tensor.initializer is not None or tensor.value is not None


def _nbits_bindings(members: list[IrNode]) -> int:
    """Worst case over the kernels: A and its int8 scales, each weight's inputs, each output."""
    per_weight = sum(t is not None for t in _nbits_inputs(members[0]))
    return 2 + (per_weight + 1) * len(members)


def _nbits_inputs(node: IrNode) -> list[int | None]:
    return [node.inputs[i] if i < len(node.inputs) else None for i in _NBITS_INPUTS]


# ----- matching -----------------------------------------------------------------------------
def _group(
    graph: IrGraph,
    node: IrNode,
    same: Callable[[IrNode], bool],
    bindings: Callable[[list[IrNode]], int],
) -> Match | Decline | None:
    """`node` and its siblings (same op reading the same A, `same` as `node`), when `node` comes first."""
    a = node.inputs[0]
    if a is None:  # A is a required input; an absent one is not ours to group
        return None
    siblings = [
        n for n, i in graph.tensor_consumers(a) if i == 0 and (n.op_type, n.domain) == (node.op_type, node.domain)
    ]
    members = list({n.id: n for n in siblings if n.id == node.id or same(n)}.values())
    if len(members) < 2:
        return None
    position = {n.id: i for i, n in enumerate(graph.nodes)}
    members.sort(key=lambda n: position[n.id])
    if members[0].id != node.id:
        return None  # alone, or not the first member (the first anchors the group)
    while len(members) > 2 and (len(members) > MAX_SLOTS or bindings(members) > MAX_BINDINGS):
        members.pop()
    for member in members[1:]:
        for t in member.inputs[1:]:
            producer = None if t is None else graph.tensor_producer(t)
            if producer is not None and position[producer.id] > position[node.id]:
                return Decline("a weight is computed after the first member, where the group would sit", member)
    return Match(node, members=members)


def _match_float(graph: IrGraph, node: IrNode) -> Match | Decline | None:
    if _float_member(graph, node) is not None:
        return None
    return _group(graph, node, lambda n: _float_member(graph, n) is None, lambda m: 1 + 2 * len(m))


def _match_nbits(graph: IrGraph, node: IrNode) -> Match | Decline | None:
    key = _nbits_key(graph, node)
    if isinstance(key, str):
        return None
    return _group(graph, node, lambda n: _nbits_key(graph, n) == key, _nbits_bindings)


# ----- rewriting ----------------------------------------------------------------------------
def _rewrite_float(graph: IrGraph, m: Match) -> None:
    _replace(graph, m.members, "MatMulGroup", [m.node.inputs[0], *(n.inputs[1] for n in m.members)], {})


def _rewrite_nbits(graph: IrGraph, m: Match) -> None:
    inputs = [m.node.inputs[0], *(t for n in m.members for t in _nbits_inputs(n))]
    while inputs[-1] is None:
        inputs.pop()
    attrs = {
        key: m.node.attributes[key] for key in ("K", "bits", "block_size", "accuracy_level") if key in m.node.attributes
    }
    _replace(graph, m.members, "MatMulNBitsGroup", inputs, {**attrs, "N": [int(n.attributes["N"]) for n in m.members]})


def _replace(graph: IrGraph, members: list[IrNode], op_type: str, inputs: list, attrs: dict) -> None:
    """One group node in the first member's place, producing every member's output."""
    outputs = [n.outputs[0] for n in members]
    for member in members[1:]:
        graph.remove_node(member, safe=False)  # its output's production moves to the group
    graph.opset_imports.setdefault(ONYXIA_DOMAIN, 1)
    graph.replace_node(members[0], op_type, inputs, attrs, domain=ONYXIA_DOMAIN, outputs=outputs)


GROUP_MATMUL_RULES = (
    Rule(
        "group_matmuls",
        ("MatMul",),
        _match_float,
        _rewrite_float,
        targets="onnx-community Gemma fp32: q/k/v and gate/up MatMuls of one normed hidden state",
    ),
    Rule(
        "group_matmul_nbits",
        ("MatMulNBits",),
        _match_nbits,
        _rewrite_nbits,
        targets="onnx-community Gemma q4 / genai int4: q/k/v and gate/up MatMulNBits of one normed hidden state",
        domain=_MICROSOFT,
    ),
)


class GroupMatMuls(RewritePass):
    name = "GroupMatMuls"
    rules = GROUP_MATMUL_RULES
