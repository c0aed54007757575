"""The rule that produces com.onyxia FusedElementwise: chains and diamonds of elementwise ops, one dispatch.

Every Gemma MLP computes ``Gelu(gate) * up`` as two dispatches with the gate activation written to memory
and read back; exporters also leave ``Sub -> Cast``, ``Mul -> Add`` and friends between the heavy ops.
On lavapipe each dispatch costs a fixed overhead and each intermediate a trip through memory, so a
region becomes one FusedElementwise node (`onyxia.operators.elementwise.fused` writes its shader).

The region (a `Cluster`) grows from its root (an elementwise node whose uses are not all would-be
members) up through fusable producers whose every use is a member (no graph outputs, no shared
storage). Fusable, when not already folded: the unary rows (Clip with known bounds), the binary rows
(broadcasting, comparisons, Where), Cast/CastLike, and two-input Sum, Mean, Max, Min (the float16
exports' inlined Gelu adds with Sum). Growth stops before the GPU reads would exceed 7 bindings (8
with the output: the portable minimum). Declines (reason logged, graph unchanged) when the shader
would need more symbolic dims (broadcast strides of symbolic shapes) than 256 B of immediates hold.
It runs after the cleanup and the other rules, which match single elementwise nodes.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from onyxia.core import IrGraph, IrNode
from onyxia.core.rewrite import Cluster, Decline, Match, NewValue, Rewriter, Rule, is_folded
from onyxia.core.shader_dims import MAX_IMMEDIATE_BYTES
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.elementwise.cast import CAST
from onyxia.operators.elementwise.fused import FUSABLE, can_fuse, gpu_reads
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.int64_checks import CARRIED, checks_int64
from onyxia.operators.layout import broadcast_strides

__all__ = ["ELEMENTWISE_FUSIONS", "MAX_READS"]

MAX_READS = 7  # storage bindings the shader reads; the output takes the eighth
# rows whose int64/uint64 form checks its range through a kernel of its own (int64_checks does not list it)
_OWN_INT64_CHECKS = frozenset({"BitShift"})


def _member(graph: IrGraph, node: IrNode) -> bool:
    out = node.outputs[0] if len(node.outputs) == 1 else None
    if node.domain != "" or out is None or not can_fuse(node.op_type, node.inputs):
        return False
    if is_folded(graph, node) or isinstance(graph.tensor(out).shape, Absent) or _attributes(node) is None:
        return False
    if any(graph.tensor(t).dtype.is_packed for t in (*node.inputs[:1], out) if t is not None):
        return False  # int4/uint4 stay packed: their casts are a kernel of their own (`cast_4bit`)
    if node.op_type in _OWN_INT64_CHECKS and graph.tensor(out).dtype in CARRIED:
        return False
    reads = gpu_reads(node.op_type)
    compile_time = [t for i, t in enumerate(node.inputs) if t is not None and i not in reads]
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


def _external_reads(members: list[IrNode]) -> list[int]:
    produced = {t for m in members for t in m.outputs}
    reads = [m.inputs[i] for m in members for i in gpu_reads(m.op_type) if i < len(m.inputs)]
    return list(dict.fromkeys(t for t in reads if t is not None and t not in produced))


def _fits_immediates(graph: IrGraph, m: Match) -> Decline | None:
    """Symbolic dims the shader takes as immediates: N, and with broadcasting dims and strides; and a
    binding left for the error word when a member checks int64 (`onyxia.operators.int64_checks`)."""
    root = m.members[-1]
    checked = [n for n in m.members if checks_int64(graph, n)]
    if checked and len(_external_reads(m.members)) >= MAX_READS:
        return Decline(f"{MAX_READS} reads leave no binding for the error word of int64 '{checked[0].name}'", root)
    out = _dims(graph, root.outputs[0])
    ins = [_dims(graph, t) for t in _external_reads(m.members)]
    dims: list[Any] = [dims_product(out)]
    if any(d != out for d in ins):
        dims += out + [s for d in ins for s in broadcast_strides(d, out)]
    if sum(not isinstance(d, int) for d in dims) * 4 > MAX_IMMEDIATE_BYTES:
        return Decline(f"broadcast strides of symbolic shapes exceed {MAX_IMMEDIATE_BYTES} B of immediates", root)
    return None


def _dims(graph: IrGraph, t: int | None) -> list[Any]:
    """A member's shape as a list, [1] for a scalar (members never have Absent shapes)."""
    shape = None if t is None else graph.tensor(t).shape
    return (list(shape.dims) if shape is not None and not isinstance(shape, Absent) else []) or [1]


def _fuse(r: Rewriter, m: Match) -> list[NewValue]:
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
    return [r.op("FusedElementwise", *inputs, domain=ONYXIA_DOMAIN, body=json.dumps(steps))]


def _reads(node: IrNode) -> tuple[int, ...]:
    return gpu_reads(node.op_type)


ELEMENTWISE_FUSIONS = (
    Rule(
        "fuse_elementwise_chain",
        Cluster(frozenset(("", op_type) for op_type in FUSABLE), _member, _reads, MAX_READS),
        _fuse,
        check=_fits_immediates,
        targets="Gemma MLP Gelu(gate) * up; Sub -> Cast and similar glue every exporter leaves",
    ),
)
