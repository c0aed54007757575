"""`FuseResidualRmsNorm`: ``RMSNorm(Add(a, b))`` becomes com.microsoft ``SkipSimplifiedLayerNormalization``.

The onnx-community Gemma export writes every residual step as ``Add(residual, SLN(x))`` followed by
``SLN(sum)``: two dispatches and a round trip of the hidden state through memory. onnxruntime-genai
exports the same step already fused (see the gemma3-tiny-genai fixture): one SkipSimplifiedLayerNormalization
with inputs (input=residual, skip=normed, gamma) and the sum as output 3 (``input_skip_bias_sum``), which
the next residual Add reads. This pass produces exactly that node, so both exports plan the same steps.
Any ``Add(a, b) -> SimplifiedLayerNormalization`` matches (the Gemma shape is the case where b is a norm),
and opset 23's RMSNormalization too.

Declines (reason logged, graph unchanged) when:
- the norm is over anything but the last axis (stash_type is always 1: inference refuses the rest);
- the scale's dtype differs from the sum's (SLN's output takes the scale's dtype, Skip* the input's);
- neither Add operand has the sum's shape, or the other does not broadcast as a trailing suffix
  (the Skip* shader reads skip at ``index % numel(skip)``);
- the norm reads the sum through a Cast (the float16 exports: Add in f16, Cast to f32, norm): the fused
  op would normalise the unrounded sum, not the f16-rounded one onnxruntime normalises;
- another use of the sum comes before the norm in graph order (the fused node sits at the norm).
"""

from __future__ import annotations

import logging

import numpy as np

from onyxia.core import IrGraph, IrNode
from onyxia.core.shapes import Absent
from onyxia.operators.normalization import LAYER_NORMS
from onyxia.operators.passes.rewrite import Decline, Match, RewritePass, Rule, is_folded, producer
from onyxia.operators.typesets import FLOATS

__all__ = ["RESIDUAL_RMS_NORM_RULES", "FuseResidualRmsNorm"]

log = logging.getLogger(__name__)

_MICROSOFT = "com.microsoft"
_SKIP_NORM = "SkipSimplifiedLayerNormalization"


def _match(graph: IrGraph, norm: IrNode) -> Match | Decline | None:
    x = norm.inputs[0]
    if x is None or is_folded(graph, norm) or len(norm.inputs) < 2 or norm.inputs[1] is None:
        return None
    add = producer(graph, x, ("Add",))
    if add is None:
        cast = producer(graph, x, ("Cast",))
        if cast is not None and producer(graph, cast.inputs[0], ("Add",)) is not None:
            return Decline(
                "the norm reads the sum through a Cast (float16 graph): it would see the unrounded sum", cast
            )
        return None
    sum_t = graph.tensor(x)
    rank = len(sum_t.shape.dims) if not isinstance(sum_t.shape, Absent) else 0
    axis = int(norm.attributes.get("axis", -1))
    if rank == 0 or axis not in (-1, rank - 1):
        return Decline(f"axis {axis} is not the last axis of a rank-{rank} input", norm)
    scale = graph.tensor(norm.inputs[1])
    if sum_t.dtype not in FLOATS or scale.dtype != sum_t.dtype:
        return Decline(f"sum is {sum_t.dtype.short} and scale {scale.dtype.short}; both must be one float dtype", scale)
    operands = _input_and_skip(graph, add)
    if operands is None:
        return Decline("the Add broadcasts an operand other than as a trailing suffix", add)
    position = {n.id: i for i, n in enumerate(graph.nodes)}
    others = [n for n, _ in graph.tensor_consumers(x) if n.id != norm.id]
    if any(position[n.id] < position[norm.id] for n in others):
        return Decline("another use of the sum precedes the norm", add)
    keep_sum = bool(others) or graph.is_graph_output(x) or x in graph.aliases.values()
    return Match(norm, add=add, input=operands[0], skip=operands[1], keep_sum=keep_sum)


def _input_and_skip(graph: IrGraph, add: IrNode) -> tuple[int, int] | None:
    """(input, skip): input has the sum's shape; skip is the same or a trailing suffix of it."""
    out = graph.tensor(add.outputs[0]).shape.dims  # type: ignore[arg-type,union-attr]
    a, b = add.inputs
    dims = {t: graph.tensor(t).shape.dims for t in (a, b)}  # type: ignore[union-attr,arg-type]
    order = (a, b) if dims[a] == out else (b, a) if dims[b] == out else None
    if order is None:
        return None
    skip = list(dims[order[1]])
    while skip and skip[0] == 1:
        skip.pop(0)
    if skip != list(out[len(out) - len(skip) :]):
        return None
    return order  # type: ignore[return-value]


def _rewrite(graph: IrGraph, m: Match) -> None:
    norm, add = m.node, m.add
    sum_t = add.outputs[0]
    epsilon = float(np.float32(norm.attributes.get("epsilon", LAYER_NORMS[norm.op_type].epsilon)))
    inv_std = norm.outputs[1] if len(norm.outputs) > 1 else None  # SLN's output 1 is Skip*'s output 2
    outputs = [norm.outputs[0], None, inv_std, sum_t if m.keep_sum else None]
    while outputs[-1] is None:
        outputs.pop()
    graph.remove_node(add, safe=False)  # the sum's production moves to the fused node
    graph.replace_node(
        norm,
        _SKIP_NORM,
        [m.input, m.skip, norm.inputs[1]],
        {"epsilon": epsilon},
        domain=_MICROSOFT,
        outputs=outputs,
    )
    if not m.keep_sum:
        graph.remove_tensor(sum_t)


def _rule(op_type: str) -> Rule:
    return Rule(
        f"fuse_add_into_{op_type}",
        (op_type,),
        _match,
        _rewrite,
        targets="onnx-community Gemma: Add(residual, SLN(x)) -> SLN(sum), as onnxruntime-genai exports it fused",
    )


RESIDUAL_RMS_NORM_RULES = (_rule("SimplifiedLayerNormalization"), _rule("RMSNormalization"))


class FuseResidualRmsNorm(RewritePass):
    name = "FuseResidualRmsNorm"
    rules = RESIDUAL_RMS_NORM_RULES
