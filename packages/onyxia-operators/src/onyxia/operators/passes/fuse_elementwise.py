"""`FuseElementwise` (the issue's ElementwiseFusionPass): chains of elementwise ops run as one dispatch.

Every Gemma MLP computes ``Gelu(gate) * up`` as two dispatches with the gate activation written to memory
and read back; exporters also leave ``Sub -> Cast``, ``Mul -> Add`` and friends between the heavy ops.
On lavapipe each dispatch costs a fixed overhead and each intermediate a trip through memory, so a chain
becomes one com.onyxia ``FusedElementwise`` node (see `onyxia.operators.elementwise.fused`).

A cluster grows from its last node (the root: an elementwise node whose uses are not all fusable nodes)
up through producers that are themselves fusable and whose every use is a member (no graph outputs, no
shared storage): chains, and diamonds such as ``x * Sigmoid(x)`` over an elementwise x. Fusable, when not
already folded: the unary rows (Clip with known bounds), the binary rows (broadcasting, comparisons,
Where), Cast/CastLike, and two-input Sum, Mean, Max, Min (the float16 exports' inlined Gelu adds with
Sum). Growth stops before the GPU reads would exceed 7 bindings (8 with the output: the portable minimum).

Declines (reason logged, graph unchanged) when the fused shader would need more symbolic dims
(broadcast strides of symbolic shapes) than lavapipe's 256 B of immediates hold.
It runs after the cleanup and the other rewrites, which match individual elementwise nodes.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from onyxia.core import IrGraph, IrNode
from onyxia.core.shader_dims import MAX_IMMEDIATE_BYTES
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.elementwise.fused import FUSABLE, can_fuse, gpu_reads
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.layout import broadcast_strides
from onyxia.operators.movement.cast import CAST
from onyxia.operators.passes.rewrite import Decline, Match, RewritePass, Rule, is_folded

__all__ = ["ELEMENTWISE_RULES", "ElementwiseFusionPass", "FuseElementwise"]

MAX_READS = 7  # storage bindings the shader reads; the output takes the eighth


def _candidate(graph: IrGraph, node: IrNode) -> bool:
    if (
        node.domain != ""
        or not can_fuse(node.op_type, node.inputs)
        or len(node.outputs) != 1
        or node.outputs[0] is None
    ):
        return False
    if is_folded(graph, node) or isinstance(graph.tensor(node.outputs[0]).shape, Absent):
        return False
    if _attributes(node) is None:
        return False
    compile_time = [t for i, t in enumerate(node.inputs) if t is not None and i not in gpu_reads(node.op_type)]
    return node.op_type in CAST or all(_known(graph, t) for t in compile_time)  # Clip's bounds become literals


def _known(graph: IrGraph, t: int) -> bool:
    tensor = graph.tensor(t)
    return tensor.value is not None or tensor.initializer is not None


def _attributes(node: IrNode) -> dict[str, Any] | None:
    """The attributes as JSON values, or None when one has no JSON form."""
    plain: dict[str, Any] = {}
    for key, value in sorted(node.attributes.items()):
        value = value.decode() if isinstance(value, bytes) else value
        value = value.item() if isinstance(value, np.generic) else value
        if not isinstance(value, (int, float, str, list)):
            return None
        plain[key] = value
    return plain


def _external_reads(graph: IrGraph, members: list[IrNode]) -> set[int]:
    produced = {t for m in members for t in m.outputs}
    return {
        t
        for m in members
        for i in gpu_reads(m.op_type)
        if i < len(m.inputs) and (t := m.inputs[i]) is not None and t not in produced
    }


def _grow(graph: IrGraph, root: IrNode) -> list[IrNode]:
    """Members in graph order: producers join while every use of their output is a member's."""
    members = [root]
    grew = True
    while grew:
        grew = False
        for node in list(members):
            for t in node.inputs:
                p = None if t is None else graph.tensor_producer(t)
                if p is None or p in members or not _candidate(graph, p) or not _used_only_by(graph, p, members):
                    continue
                if len(_external_reads(graph, [*members, p])) <= MAX_READS:
                    members.append(p)
                    grew = True
    if len(members) == 1:
        return members
    position = {n.id: i for i, n in enumerate(graph.nodes)}
    return sorted(members, key=lambda n: position[n.id])


def _used_only_by(graph: IrGraph, node: IrNode, members: list[IrNode]) -> bool:
    """`node`'s output feeds `members` only: nothing outside the cluster needs it written to memory."""
    t = node.outputs[0]
    assert t is not None
    uses = graph.tensor_consumers(t)
    if not uses or graph.is_graph_output(t) or t in graph.aliases or t in graph.aliases.values():
        return False
    return all(n in members for n, _ in uses)


def _immediates(graph: IrGraph, root: IrNode, reads: set[int]) -> int:
    """Symbolic dims the shader would take as immediates (N, and with broadcasting dims and strides)."""
    out = list(graph.tensor(root.outputs[0]).shape.dims) or [1]  # type: ignore[arg-type,union-attr]
    ins = [list(graph.tensor(t).shape.dims) or [1] for t in reads]  # type: ignore[union-attr]
    dims = [dims_product(out)]
    if any(d != out for d in ins):
        dims += out + [s for d in ins for s in broadcast_strides(d, out)]
    return sum(not isinstance(d, int) for d in dims)


def _match(graph: IrGraph, root: IrNode) -> Match | Decline | None:
    if not _candidate(graph, root):
        return None
    consumers = [n for n, _ in graph.tensor_consumers(root.outputs[0])]  # type: ignore[arg-type]
    if _used_only_by(graph, root, consumers) and all(_candidate(graph, n) for n in consumers):
        return None  # not a root: its consumers' cluster takes it (a later sweep, if they fuse apart)
    members = _grow(graph, root)
    if len(members) < 2:
        return None
    reads = _external_reads(graph, members)
    if _immediates(graph, root, reads) * 4 > MAX_IMMEDIATE_BYTES:
        return Decline(f"broadcast strides of symbolic shapes exceed {MAX_IMMEDIATE_BYTES} B of immediates", root)
    return Match(root, members=members)


def _rewrite(graph: IrGraph, m: Match) -> None:
    members: list[IrNode] = m.members
    results = {n.outputs[0]: f"t{k}" for k, n in enumerate(members)}
    inputs: list[int] = []
    steps = []
    for node in members:
        refs = []
        for t in node.inputs:
            if t is None:
                refs.append("")
            elif t in results:
                refs.append(results[t])
            else:
                inputs += [t] if t not in inputs else []
                refs.append(f"x{inputs.index(t)}")
        step: dict[str, object] = {"op": node.op_type, "name": node.name, "inputs": refs}
        step.update({"attrs": attrs} if (attrs := _attributes(node)) else {})
        steps.append(step)
    graph.opset_imports.setdefault(ONYXIA_DOMAIN, 1)
    graph.replace_node(m.node, "FusedElementwise", inputs, {"body": json.dumps(steps)}, domain=ONYXIA_DOMAIN)
    for node in reversed(members[:-1]):
        graph.remove_node(node)
        graph.remove_tensor(node.outputs[0])  # type: ignore[arg-type]


ELEMENTWISE_RULES = (
    Rule(
        "fuse_elementwise_chain",
        tuple(FUSABLE),
        _match,
        _rewrite,
        targets="Gemma MLP Gelu(gate) * up; Sub -> Cast and similar glue every exporter leaves",
    ),
)


class FuseElementwise(RewritePass):
    name = "FuseElementwise"
    rules = ELEMENTWISE_RULES


ElementwiseFusionPass = FuseElementwise  # the name
