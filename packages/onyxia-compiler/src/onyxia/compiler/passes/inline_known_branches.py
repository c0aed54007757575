"""`If` nodes whose condition folds to a number become the chosen branch's nodes, in place.

torch.onnx writes Python ``if``s over shapes (``if boxes.numel() == 0``) as `If`; once the shapes
are static the condition folds, and running the branch as a subplan would cost a submit and keep
the outer passes from fusing across it. So the branch's nodes move into the outer graph before the
`If` (fresh tensor names, its outer-scope reads bound to the node's captured inputs) and an
`Identity` per output keeps the `If`'s output tensors, names included. Shape inference does this as
it meets the `If` (its condition folded by then) and starts its round again, so the new nodes are
typed and folded before anything reads the `If`'s outputs: a branch that only computes shapes
(AffineGrid's expansion splits its size input per rank) folds like any shape arithmetic. A
condition known only at run time stays an `If` (`RunSubplan`).
"""

from __future__ import annotations

import logging

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode, TensorKind
from onyxia.core.shapes import Absent
from onyxia.core.subgraphs import captured_inputs

__all__ = ["inline_known_branch"]

log = logging.getLogger(__name__)


def inline_known_branch(graph: IrGraph, node: IrNode) -> bool:
    """Replace `node` by its branch when it is an `If` whose condition has folded to a number."""
    if node.op_type != "If" or node.domain not in ("", "ai.onnx") or not node.inputs or node.inputs[0] is None:
        return False
    condition = graph.tensor(node.inputs[0])
    value = condition.value
    if value is None and condition.initializer is not None and condition.initializer.numel == 1:
        value = condition.initializer.numpy()
    if value is None or value.dtype == object or value.size != 1:
        return False
    branch = node.attributes["then_branch" if bool(np.asarray(value).reshape(-1)[0]) else "else_branch"]
    if not isinstance(branch, IrGraph):
        return False
    _inline(graph, node, branch)
    log.debug("If '%s': condition known, branch inlined", node.name)
    return True


def _inline(graph: IrGraph, node: IrNode, branch: IrGraph) -> None:
    """Move `branch`'s nodes before `node`, then replace `node` by one Identity per output."""
    outer: dict[int, int | None] = dict(zip(branch.inputs, captured_inputs(node)))
    for tensor in branch.tensors:
        if tensor.id in outer or branch.tensor_producer(tensor.id) is not None:
            continue  # inputs are bound; node outputs are made with their node
        kind = TensorKind.INITIALIZER if tensor.initializer is not None or tensor.value is not None else tensor.kind
        made = graph.add_tensor(
            f"{node.name}/{tensor.name}",
            tensor.dtype,
            tensor.shape,
            kind,
            value=tensor.value,
            initializer=tensor.initializer,
        )
        outer[tensor.id] = made.id
    for inner in branch.topological_order():
        outputs: list[int | None] = []
        for tid in inner.outputs:
            if tid is None:
                outputs.append(None)
                continue
            made = graph.add_tensor(f"{node.name}/{branch.tensor(tid).name}", DataType.UNDEFINED, Absent())
            outer[tid] = made.id
            outputs.append(made.id)
        inputs = [None if t is None else outer[t] for t in inner.inputs]
        graph.add_node(
            inner.op_type,
            inputs,
            outputs,
            dict(inner.attributes),
            domain=inner.domain,
            name=f"{node.name}/{inner.name}",
            opset=inner.opset,
            before=node,
        )
    results = [outer[t] for t in branch.outputs]
    targets = list(node.outputs)
    graph.remove_node(node, safe=False)
    for result, target in zip(results, targets):
        if target is not None:
            graph.add_node("Identity", [result], [target], name=f"{node.name}/result", opset=1)
