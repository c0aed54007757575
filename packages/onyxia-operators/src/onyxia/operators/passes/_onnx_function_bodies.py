"""ONNX function bodies of the ops onnxruntime's CPU EP inlines when it has no float16 kernel for them.

`MatchOnnxruntimeCpuFloat16` replaces such a node by its body, in the node's dtype, the way
onnxruntime's partitioner does; the body's ops then get wrapped in float32 like any other. Each body
follows the ONNX schema's function (onnx/defs/*), as onnxruntime's saved optimized model shows it.
Constants are float32 behind a Cast to the input's dtype (the body's CastLike, which onnxruntime
inlines to a Cast): the pass removes that Cast with the inserted one after it, so they stay float32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onyxia.core import GraphBuilder, IrGraph, IrNode, TensorDef

__all__ = ["FUNCTION_BODIES", "FunctionBody"]

# (builder, graph, node) -> the body's last node as (op_type, inputs, attributes); it takes over node's outputs
Build = Callable[[GraphBuilder, IrGraph, IrNode], tuple[str, list[Any], dict[str, Any]]]


@dataclass(frozen=True)
class FunctionBody:
    since: int  # first opset whose schema has this function body
    build: Build


def _emitter(b: GraphBuilder, graph: IrGraph, node: IrNode) -> Callable[..., TensorDef]:
    """`op("Mul", a, b)` adds a body node named after `node` (as onnxruntime's _inlfunc_ names are)."""

    def op(op_type: str, *inputs: TensorDef | None, **attrs: Any) -> TensorDef:
        return b.op(op_type, *inputs, _name=f"{node.name}/{op_type}", **attrs)

    return op


def _constant(b: GraphBuilder, graph: IrGraph, node: IrNode, value: float) -> TensorDef:
    """A float32 constant cast to the node's input dtype (ONNX: Constant + CastLike(c, X))."""
    const = b.initializer(f"{node.name}/{value!r}", np.array(value, np.float32))
    x = graph.tensor(node.inputs[0])
    return b.op("Cast", const, to=int(x.dtype), _name=f"{node.name}/CastLike")


def _gelu(b: GraphBuilder, graph: IrGraph, node: IrNode) -> tuple[str, list[Any], dict[str, Any]]:
    op, x = _emitter(b, graph, node), graph.tensor(node.inputs[0])
    approximate = node.attributes.get("approximate", "none")
    half, one = _constant(b, graph, node, 0.5), _constant(b, graph, node, 1.0)
    mult_x = op("Mul", half, x)
    if (approximate.decode() if isinstance(approximate, bytes) else approximate) == "tanh":
        x_cubed = op("Pow", x, _constant(b, graph, node, 3.0))
        inner = op("Sum", x, op("Mul", _constant(b, graph, node, 0.044715), x_cubed))
        scale = op("Sqrt", _constant(b, graph, node, float(np.float32(2 / np.pi))))
        phi = op("Sum", one, op("Tanh", op("Mul", scale, inner)))
    else:
        sqrt_two = op("Sqrt", _constant(b, graph, node, 2.0))
        phi = op("Sum", one, op("Erf", op("Div", x, sqrt_two)))
    return "Mul", [mult_x, phi], {}


def _axes(b: GraphBuilder, node: IrNode) -> TensorDef:
    return b.initializer(f"{node.name}/axes", np.array([node.attributes.get("axis", -1)], np.int64))


def _softmax_parts(b: GraphBuilder, graph: IrGraph, node: IrNode) -> tuple[Callable[..., TensorDef], Any, Any]:
    """Softmax-13's shared steps: x - max(x) and its exp's sum over `axis` (keepdims)."""
    op, x, axes = _emitter(b, graph, node), graph.tensor(node.inputs[0]), _axes(b, node)
    if node.opset >= 18:
        maximum = op("ReduceMax", x, axes, keepdims=1)
    else:  # ReduceMax took axes as an attribute before opset 18
        maximum = op("ReduceMax", x, keepdims=1, axes=[node.attributes.get("axis", -1)])
    shifted = op("Sub", x, maximum)
    exp = op("Exp", shifted)
    return op, (shifted, exp), op("ReduceSum", exp, axes, keepdims=1)


def _softmax(b: GraphBuilder, graph: IrGraph, node: IrNode) -> tuple[str, list[Any], dict[str, Any]]:
    _, (_, exp), total = _softmax_parts(b, graph, node)
    return "Div", [exp, total], {}


def _log_softmax(b: GraphBuilder, graph: IrGraph, node: IrNode) -> tuple[str, list[Any], dict[str, Any]]:
    op, (shifted, _), total = _softmax_parts(b, graph, node)
    return "Sub", [shifted, op("Log", total)], {}


def _reduce_sum(node: IrNode, data: Any) -> tuple[str, list[Any], dict[str, Any]]:
    """ReduceSum over the node's own axes input and attributes (the opset-18 reduce functions' last step)."""
    return "ReduceSum", [data, *node.inputs[1:2]], dict(node.attributes)


def _reduce_l1(b: GraphBuilder, graph: IrGraph, node: IrNode) -> tuple[str, list[Any], dict[str, Any]]:
    return _reduce_sum(node, _emitter(b, graph, node)("Abs", graph.tensor(node.inputs[0])))


def _reduce_sum_square(b: GraphBuilder, graph: IrGraph, node: IrNode) -> tuple[str, list[Any], dict[str, Any]]:
    x = graph.tensor(node.inputs[0])
    return _reduce_sum(node, _emitter(b, graph, node)("Mul", x, x))


def _reduce_log_sum(b: GraphBuilder, graph: IrGraph, node: IrNode) -> tuple[str, list[Any], dict[str, Any]]:
    op, x = _emitter(b, graph, node), graph.tensor(node.inputs[0])
    axes = [graph.tensor(t) for t in node.inputs[1:2] if t is not None]
    return "Log", [op("ReduceSum", x, *axes, **node.attributes)], {}


def _cast_like(b: GraphBuilder, graph: IrGraph, node: IrNode) -> tuple[str, list[Any], dict[str, Any]]:
    like = graph.tensor(node.inputs[1])
    return "Cast", [node.inputs[0]], {"to": int(like.dtype), **node.attributes}


FUNCTION_BODIES: dict[str, FunctionBody] = {
    "Gelu": FunctionBody(20, _gelu),
    "Softmax": FunctionBody(13, _softmax),
    "LogSoftmax": FunctionBody(13, _log_softmax),
    "ReduceL1": FunctionBody(18, _reduce_l1),
    "ReduceLogSum": FunctionBody(18, _reduce_log_sum),
    "ReduceSumSquare": FunctionBody(18, _reduce_sum_square),
    "CastLike": FunctionBody(15, _cast_like),
}
