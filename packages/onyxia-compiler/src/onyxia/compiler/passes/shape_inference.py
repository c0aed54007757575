"""Give every tensor a dtype and a Static or Symbolic shape — or fail naming the node (every node
whose feature is not implemented, at once: `UnsupportedFeatures`).

Shapes depend on values (Reshape's target, Expand's shape, Slice's starts), so each node is
folded right after its shapes are inferred, the way ONNX's data propagation works: a
``Shape -> Gather -> Concat -> Reshape`` chain is fully known by the time Reshape is reached.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from onyxia.compiler.passes.constant_folding import fold_node
from onyxia.compiler.passes.inline_known_branches import inline_known_branch
from onyxia.compiler.passes.unsupported_features import UnsupportedFeatures
from onyxia.core import (
    Absent,
    InferenceCtx,
    IrGraph,
    IrNode,
    OnyxiaError,
    OperatorRegistry,
    ShapeInferenceError,
    Stage,
    UnsupportedOpError,
)
from onyxia.core.subgraphs import nodes_within

__all__ = ["ShapeInferencePass", "check_supported"]

log = logging.getLogger(__name__)


class ShapeInferencePass:
    name = "ShapeInference"
    stage = Stage.INFERENCE

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        check_supported(graph, registry)
        changed = 0
        unsupported = UnsupportedFeatures()
        for node in graph.topological_order():
            if unsupported.skips(node):
                continue
            if inline_known_branch(graph, node):  # an If whose condition folded: its branch, typed next round
                return True
            try:
                changed += _infer_node(graph, node, registry)
            except UnsupportedOpError as e:
                unsupported.record(node, e)
                continue
            fold_node(graph, node, registry)
        unsupported.probe_plans(graph, registry)
        unsupported.raise_any()
        log.info("%s: %d tensors changed type or shape", self.name, changed)
        return changed > 0


def check_supported(graph: IrGraph, registry: OperatorRegistry) -> None:
    """Raise one `UnsupportedOpError` listing every op the registry lacks (subgraphs' included), with
    counts and nodes."""
    missing: dict[tuple[str, str, int], list[str]] = defaultdict(list)
    for node in nodes_within(graph):
        if registry.get(node.domain, node.op_type, node.opset) is None:
            missing[(node.domain or "ai.onnx", node.op_type, node.opset)].append(node.name)
    if missing:
        lines = [
            f"  {domain}::{op} (opset {opset}): {len(names)} node(s): {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
            for (domain, op, opset), names in sorted(missing.items())
        ]
        total = sum(len(v) for v in missing.values())
        raise UnsupportedOpError(f"{len(missing)} unsupported op type(s), {total} node(s):\n" + "\n".join(lines))


def _infer_node(graph: IrGraph, node: IrNode, registry: OperatorRegistry) -> int:
    operator = registry.get(node.domain, node.op_type, node.opset)
    assert operator is not None
    ctx = InferenceCtx(graph, node)
    for i, t in enumerate(node.inputs):
        if t is not None and isinstance(graph.tensor(t).shape, Absent):
            raise ctx.error(f"input {i} ('{graph.tensor(t).name}') has no inferred shape")
    graph.static_required.pop(node.id, None)  # the rule records again what its inputs' shapes still leave open
    try:
        results = list(operator.infer_output_shapes(ctx))
    except OnyxiaError:
        raise
    except Exception as e:  # an operator bug must still name the node
        raise ctx.error(f"shape inference failed: {type(e).__name__}: {e}") from e
    if len(results) < sum(t is not None for t in node.outputs):
        raise ShapeInferenceError(
            f"node '{node.name}' ({node.op_type}): operator returned {len(results)} output types "
            f"for {len(node.outputs)} outputs"
        )
    changed = 0
    for t, (dtype, shape) in zip(node.outputs, results):
        if t is None:
            continue
        tensor = graph.tensor(t)
        if (tensor.dtype, tensor.shape) != (dtype, shape):
            tensor.dtype, tensor.shape = dtype, shape
            changed += 1
    return changed
