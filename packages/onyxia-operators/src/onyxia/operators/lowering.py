"""`LoweredOp` and `LowerContribOps`: contrib ops that are compositions of ops Onyxia already runs.

onnxruntime's transformer optimizer packs a BERT/ViT layer's plain ops into com.microsoft nodes
(Attention, EmbedLayerNormalization, FusedMatMul ...; `operators.transformer`), and its quantizer
writes DynamicQuantizeLSTM (`operators.quantized`). Each is exactly a short chain of ops with
kernels here (MatMul, Split, Reshape, Gather, LayerNormalization, com.onyxia
ScaledDotProductAttention ...), so instead of a kernel per contrib op, its row says how to spell it
in those ops and `LowerContribOps` replaces the node by that chain once its inputs are typed. The
chain then meets the same fusions (bias epilogues, packed-projection splits, elementwise clusters)
as the plain export would, and every kernel stays the one its family owns.

A row keeps `infer_output_shapes` (the first inference round, and every check on the contrib
node's inputs, happen before lowering), so a bad node fails naming itself, not a piece of its body.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    IrGraph,
    IrNode,
    OperatorRegistry,
    PlanCtx,
    Stage,
    TensorKind,
    TensorType,
)
from onyxia.core.shapes import Absent, shape_of
from onyxia.core.values import TensorValue

__all__ = ["BODY_OPSET", "Body", "LowerContribOps", "LoweredOp"]

log = logging.getLogger(__name__)

BODY_OPSET = 21  # default-domain ops of a body follow opset 21 (Split's num_outputs, Reshape's input target)


class Body:
    """Adds a node's replacement in front of it: ``body.op("MatMul", x, w)`` returns the output id."""

    def __init__(self, graph: IrGraph, node: IrNode) -> None:
        self.graph, self.node = graph, node
        self.ctx = InferenceCtx(graph, node)  # attributes, input dims and errors that name the node

    def input(self, i: int) -> int | None:
        return self.node.inputs[i] if i < len(self.node.inputs) else None

    def required(self, i: int) -> int:
        """Input `i`, which the operator's checks made required."""
        t = self.input(i)
        if t is None:
            raise self.ctx.error(f"input {i} is required")
        return t

    def op(self, op_type: str, *inputs: int | None, domain: str = "", outputs: int = 1, **attrs: Any) -> int:
        """A body node; its first output (see `ops` for several)."""
        return self.ops(op_type, *inputs, domain=domain, outputs=outputs, **attrs)[0]

    def ops(self, op_type: str, *inputs: int | None, domain: str = "", outputs: int = 1, **attrs: Any) -> list[int]:
        base = f"{self.node.name}/{op_type}"
        outs = [self.graph.add_tensor(f"{base}_out{i}", DataType.UNDEFINED, Absent()).id for i in range(outputs)]
        opset = BODY_OPSET if domain == "" else self.graph.opset_imports.get(domain, 1)
        self.graph.add_node(op_type, list(inputs), outs, attrs, domain=domain, name=base, opset=opset, before=self.node)
        return outs

    def const(self, value: np.ndarray | np.generic, label: str) -> int:
        """An initializer (known to inference and folding at once)."""
        array = np.asarray(value)
        name = f"{self.node.name}/{label}"
        dtype, stored = DataType.from_numpy(array.dtype), TensorValue.from_numpy(array, name)
        tensor = self.graph.add_tensor(
            name, dtype, shape_of(list(array.shape)), TensorKind.INITIALIZER, initializer=stored
        )
        tensor.value = array
        return tensor.id

    def ints(self, values: Sequence[int], label: str) -> int:
        return self.const(np.asarray(values, np.int64), label)


Lower = Callable[[Body], Sequence[int | None]]  # the tensors that take over the node's outputs, in order


@dataclass(frozen=True)
class LoweredOp:
    """An operator whose plan is its lowering: `infer` types the contrib node, `lower` writes its body."""

    name: str
    infer: Callable[[InferenceCtx], list[TensorType]]
    lower: Lower

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        return self.infer(ctx)

    def try_fold(self, ctx: FoldCtx) -> None:
        return None  # its body folds, node by node, once lowered

    def plan(self, ctx: PlanCtx) -> None:
        raise ctx.error(
            f"{self.name} is planned as the ops LowerContribOps replaces it by; that pass did not run "
            "(a pipeline built without the registry's default passes)"
        )


class LowerContribOps:
    """Replace every `LoweredOp` node whose inputs are typed by its body (INFERENCE stage: the round
    after the node is typed; the next ShapeInference round types and folds the body)."""

    name = "LowerContribOps"
    stage = Stage.INFERENCE

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        lowered = 0
        for node in graph.nodes:
            operator = registry.get(node.domain, node.op_type, node.opset)
            if not isinstance(operator, LoweredOp) or not _typed(graph, node):
                continue
            outputs = list(operator.lower(Body(graph, node)))
            _splice(graph, node, outputs)
            lowered += 1
        self.last_rewrites = lowered
        log.info("%s: lowered %d nodes", self.name, lowered)
        return lowered > 0


def _typed(graph: IrGraph, node: IrNode) -> bool:
    tensors = [graph.tensor(t) for t in [*node.inputs, *node.outputs] if t is not None]
    return all(not isinstance(t.shape, Absent) and t.dtype != DataType.UNDEFINED for t in tensors)


def _splice(graph: IrGraph, node: IrNode, outputs: list[int | None]) -> None:
    """The body's results take over the node's output tensors (ids, names, graph outputs), through an
    Identity each: a view once `BufferAliasingPass` runs."""
    anchor = graph.node_after(node)
    graph.remove_node(node, safe=False)
    for old, new in zip(node.outputs, outputs):
        if old is None:
            continue
        if new is None:
            raise InferenceCtx(graph, node).error(f"lowering gave no value for output '{graph.tensor(old).name}'")
        graph.add_node("Identity", [new], [old], name=f"{node.name}/out", opset=BODY_OPSET, before=anchor)
