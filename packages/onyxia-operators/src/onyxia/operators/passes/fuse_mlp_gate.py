"""`FuseMlpGate`: a gate/up group feeding ``Mul(Gelu(gate), up)`` becomes one gated product.

Gemma's MLP computes ``Gelu(x @ W_gate, approximate="tanh") * (x @ W_up)``. After `GroupMatMuls` the two
products are one dispatch; this pass moves the Gelu and the Mul into that dispatch too (com.onyxia
`GatedMatMul` / `GatedMatMulNBits`), so neither product is stored and no elementwise dispatch follows. It
runs before `FuseElementwise`, which would otherwise take the Gelu and Mul into a fused elementwise node.

Matches a two-weight MatMulGroup or MatMulNBitsGroup whose one output (either) is read only by a
default-domain Gelu, whose output is read only by a Mul of it and the other output, read only there
(either operand order). Declines (reason logged, graph unchanged) when the weights have bias (the gated
kernel adds none). Outputs equal the unfused graph's: the kernel rounds through the storage type where the
unfused ops store.
"""

from __future__ import annotations

from onyxia.core import IrGraph, IrNode
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.passes.rewrite import Decline, Match, RewritePass, Rule, sole_use

__all__ = ["FuseMlpGate", "MLP_GATE_RULES"]

_GATED = {"MatMulGroup": "GatedMatMul", "MatMulNBitsGroup": "GatedMatMulNBits"}


def _match(graph: IrGraph, group: IrNode) -> Match | Decline | None:
    if len(group.outputs) != 2 or None in group.outputs:
        return None
    for gate in (0, 1):
        gelu = sole_use(graph, group.outputs[gate])  # type: ignore[arg-type]
        if gelu is None or (gelu.op_type, gelu.domain) != ("Gelu", "") or gelu.outputs[0] is None:
            continue
        mul = sole_use(graph, gelu.outputs[0])
        up = group.outputs[1 - gate]
        if (
            mul is None
            or (mul.op_type, mul.domain) != ("Mul", "")
            or sorted(mul.inputs) != sorted([gelu.outputs[0], up])  # type: ignore[type-var]
        ):
            continue
        if sole_use(graph, up) is None:  # type: ignore[arg-type]
            return Decline("the up projection has other uses", graph.tensor(up))  # type: ignore[arg-type]
        if group.op_type == "MatMulNBitsGroup" and len(group.inputs) > 4 and group.inputs[4] is not None:
            return Decline("the projections have bias; the gated kernel adds none", group)
        return Match(group, gate=gate, gelu=gelu, mul=mul)
    return None


def _rewrite(graph: IrGraph, m: Match) -> None:
    group, gelu, mul = m.node, m.gelu, m.mul
    order = [m.gate, 1 - m.gate]
    if group.op_type == "MatMulGroup":
        inputs = [group.inputs[0], *(group.inputs[1 + s] for s in order)]
    else:
        slots = [group.inputs[1 + 4 * s : 5 + 4 * s] for s in order]
        inputs = [group.inputs[0], *(t for slot in slots for t in [*slot, *[None] * (4 - len(slot))])]
        while inputs[-1] is None:
            inputs.pop()
    attrs = {**group.attributes, "approximate": gelu.attributes.get("approximate", "none")}
    if "N" in attrs:
        attrs["N"] = [attrs["N"][s] for s in order]
    products = list(group.outputs)
    graph.replace_node(mul, _GATED[group.op_type], inputs, attrs, domain=ONYXIA_DOMAIN)
    graph.remove_node(gelu)
    graph.remove_tensor(gelu.outputs[0])
    graph.remove_node(group)
    for t in products:
        graph.remove_tensor(t)


MLP_GATE_RULES = tuple(
    Rule(
        f"fuse_gelu_mul_into_{op_type}",
        (op_type,),
        _match,
        _rewrite,
        targets="onnx-community Gemma: Mul(Gelu(x @ W_gate, approximate='tanh'), x @ W_up)",
        domain=ONYXIA_DOMAIN,
    )
    for op_type in _GATED
)


class FuseMlpGate(RewritePass):
    name = "FuseMlpGate"
    rules = MLP_GATE_RULES
