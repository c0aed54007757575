"""Compute on the host every output whose inputs are known at compile time.

Values come from Constants, small initializers and earlier folds; folded outputs get a `value`
and their nodes emit no GPU step. Large results (over `FOLD_ELEMENT_LIMIT` elements) are left to
the GPU rather than held in host memory, with two exceptions:

- a view (`folds_as_view`: Reshape and its family) of an initializer folds at any size into a new lazy
  initializer sharing the source's data, so a consumer that repacks known weights (GatherBlockQuantized
  on the genai builder's Reshape of the tied lm head) sees packed bytes rather than a run-time uint8
  tensor bound at one byte per u32;
- a node of weights alone (every input an initializer or a folded value) folds up to
  `WEIGHT_FOLD_ELEMENT_LIMIT` elements in and out: the Cast / Sub / Mul / Transpose that dequantize
  DynamicQuantizeLSTM's [2, 512, 2048] weights, or a QDQ model's DequantizeLinear, ran on every run
  before (ddddocr's int8 recogniser: ~80 ms of its ~360 ms), and a MatMul by the folded weight takes
  it as panels. Beyond that limit (an LLM's tied embedding) the work stays on the GPU.
"""

from __future__ import annotations

import logging

import numpy as np

from onyxia.core import (
    FOLD_ELEMENT_LIMIT,
    WEIGHT_FOLD_ELEMENT_LIMIT,
    Absent,
    FoldCtx,
    IrGraph,
    IrNode,
    OnyxiaError,
    OperatorRegistry,
    ShapeInferenceError,
    Stage,
    SymbolicDim,
    TensorKind,
    TensorValue,
    as_output_value,
    static_dims,
)

__all__ = ["ConstantFoldingPass", "fold_node"]

log = logging.getLogger(__name__)


class ConstantFoldingPass:
    name = "ConstantFolding"
    stage = Stage.FOLDING

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        folded = sum(fold_node(graph, node, registry) for node in graph.topological_order())
        log.info("%s: folded %d nodes", self.name, folded)
        return folded > 0


def fold_node(graph: IrGraph, node: IrNode, registry: OperatorRegistry) -> bool:
    """Fold `node` if possible; True when it gained values this time."""
    outputs = [graph.tensor(t) for t in node.outputs if t is not None]
    if not outputs or all(t.value is not None for t in outputs):
        return False
    if any(isinstance(t.shape, Absent) for t in outputs):
        return False
    operator = registry.get(node.domain, node.op_type, node.opset)
    if operator is None:
        return False
    # a Constant's value already exists whatever its size; anything else big stays on the GPU, but views and
    # weights alone (the docstring)
    weights_only = False
    if not getattr(operator, "always_fold", False) and any(_numel(t.dims) > FOLD_ELEMENT_LIMIT for t in outputs):
        if getattr(operator, "folds_as_view", False) and _fold_view(graph, node):
            return True
        if any(_numel(t.dims) > WEIGHT_FOLD_ELEMENT_LIMIT for t in outputs) or not _weights_only(graph, node):
            return False
        weights_only = True
    ctx = FoldCtx(graph, node, weights_only=weights_only)
    try:
        values = operator.try_fold(ctx)
    except OnyxiaError:
        raise
    except Exception as e:
        raise ctx.error(f"constant folding failed: {type(e).__name__}: {e}") from e
    if values is None:
        return False
    for tensor, value in zip(outputs, values):
        value = np.asarray(value)
        expected = tuple(tensor.dims)
        if value.shape != expected and all(isinstance(d, int) for d in expected):
            raise ShapeInferenceError(
                f"node '{node.name}' ({node.op_type}): folded value of output '{tensor.name}' has shape "
                f"{list(value.shape)}, but inference said {list(expected)}"
            )
        tensor.value = as_output_value(value, tensor.dtype.numpy)
    return True


def _fold_view(graph: IrGraph, node: IrNode) -> bool:
    """Replace a view op of an initializer by a lazy initializer with the output's dims; nothing is
    loaded or copied now (the loader reshapes the source's array when the weight is read)."""
    source = graph.tensor(node.inputs[0]) if node.inputs and node.inputs[0] is not None else None
    output = graph.tensor(node.outputs[0])
    dims = static_dims(output.dims)
    if source is None or source.initializer is None or source.dtype.is_packed or dims is None:
        return False  # 4-bit initializers hold packed bytes, whose array shape is not the logical one
    if len(node.outputs) != 1 or graph.is_graph_output(output):
        return False
    weight = source.initializer
    graph.remove_node(node, safe=False)
    output.kind = TensorKind.INITIALIZER
    output.initializer = TensorValue(output.dtype, dims, lambda: weight.numpy().reshape(dims), name=output.name)
    return True


# ops a weights-only fold leaves alone when they read a raw initializer past FOLD_ELEMENT_LIMIT: rewrite rules
# read those in place instead of holding a second copy (a tied table's Transpose: MatMulTransB, column gathers)
_READ_IN_PLACE = frozenset({"Transpose"})


def _weights_only(graph: IrGraph, node: IrNode) -> bool:
    """Every input is a folded value or an initializer within `WEIGHT_FOLD_ELEMENT_LIMIT`, every output's dims
    are static, and the node is not one whose raw initializer the rewrites read in place (`_READ_IN_PLACE`)."""
    if any(static_dims(graph.tensor(t).dims) is None for t in node.outputs if t is not None):
        return False
    for t in node.inputs:
        if t is None:
            continue
        tensor = graph.tensor(t)
        if tensor.value is not None:
            continue
        if tensor.initializer is None or tensor.initializer.numel > WEIGHT_FOLD_ELEMENT_LIMIT:
            return False
        if node.op_type in _READ_IN_PLACE and tensor.initializer.numel > FOLD_ELEMENT_LIMIT:
            return False
    return True


def _numel(dims: tuple[SymbolicDim, ...]) -> int:
    ints = static_dims(dims)
    if ints is None:
        return FOLD_ELEMENT_LIMIT + 1  # symbolic sizes are never folded
    return int(np.prod(ints, dtype=np.int64))
