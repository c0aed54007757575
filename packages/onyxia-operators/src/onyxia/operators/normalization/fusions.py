"""Rewrite rules that produce this family's kernels: SkipSimplifiedLayerNormalization and RmsNormRotary.

- ``fuse_add_into_<norm>``: ``RMSNorm(Add(a, b))`` becomes com.microsoft SkipSimplifiedLayerNormalization,
  the node onnxruntime-genai exports for a residual step (inputs: input=residual, skip, gamma; the sum
  as output 3 when something else reads it), so the onnx-community Gemma export (``Add(residual,
  SLN(x))`` then ``SLN(sum)``) plans the same steps. Opset 23's RMSNormalization too. Declines: a
  norm over anything but the last axis; a scale dtype other than the sum's; an Add that broadcasts an
  operand other than as a trailing suffix; a norm reading the sum through a Cast (the float16 exports:
  the fused op would normalise the unrounded sum, not the f16-rounded one onnxruntime normalises).
- ``fuse_rms_norm_into_rotary``: Gemma 3 and Qwen 3 normalise q and k per head before RoPE, exported as
  ``Reshape(x, [0, -1, head]) -> SimplifiedLayerNormalization -> Reshape(back) -> RotaryEmbedding``
  (optionally between ``Cast(to=float)`` and a Cast back, in float16 exports): one RmsNormRotary
  dispatch instead of two. Not folded into GroupQueryAttention's do_rotary: GQA derives positions from
  seqlens_k, RotaryEmbedding reads explicit position_ids, and only the caller knows they agree.
  Declines when the norm's rows are not the rotation's heads, the reshapes are not a round trip, or the
  rotary input is not 3-D.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode
from onyxia.core.rewrite import AnyOf, Attr, Decline, Match, NewValue, OpPattern, Rewriter, Rule, Var, is_folded, ms, op
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.normalization.layer_norm import LAYER_NORMS
from onyxia.operators.normalization.rotary import rotary_head_size
from onyxia.operators.typesets import FLOATS

__all__ = ["NORMALIZATION_FUSIONS"]

_NORMS = ("SimplifiedLayerNormalization", "RMSNormalization")
_ROTARY_ATTRS = ("interleaved", "num_heads", "rotary_embedding_dim", "angle_cache")


def _live(graph: IrGraph, node: IrNode) -> bool:
    return not is_folded(graph, node) and len(node.inputs) >= 2 and node.inputs[1] is not None


def _epsilon(norm: IrNode) -> float:
    return float(np.float32(norm.attributes.get("epsilon", LAYER_NORMS[norm.op_type].epsilon)))


# ----- fuse_add_into_<norm> ---------------------------------------------------------------------
def _residual_pattern(norm_op: str) -> OpPattern:
    add = op.Add(Var("a"), Var("b"), _name="add", _shared=True)
    through_cast = op.Cast(op.Add(Var(), Var(), _name="add", _shared=True), _name="cast", _shared=True)
    return op.any_of((norm_op,), AnyOf(add, through_cast), Var("scale"), _where=_live, axis=Attr("axis", -1))


def _residual_check(graph: IrGraph, m: Match) -> Decline | None:
    if getattr(m, "cast", None) is not None:
        return Decline("the norm reads the sum through a Cast (float16 graph): it would see the unrounded sum", m.cast)
    sum_t = graph.tensor(m.add.outputs[0])
    rank = 0 if isinstance(sum_t.shape, Absent) else len(sum_t.shape.dims)
    if rank == 0 or m.axis not in (-1, rank - 1):
        return Decline(f"axis {m.axis} is not the last axis of a rank-{rank} input", m.node)
    scale = graph.tensor(m.scale)
    if sum_t.dtype not in FLOATS or scale.dtype != sum_t.dtype:
        return Decline(f"sum is {sum_t.dtype.short} and scale {scale.dtype.short}; both must be one float dtype", scale)
    if input_and_skip(graph, m.add) is None:
        return Decline("the Add broadcasts an operand other than as a trailing suffix", m.add)
    return None


def _residual(r: Rewriter, m: Match) -> dict[int, NewValue]:
    norm, total = m.node, m.add.outputs[0]
    operands = input_and_skip(r.graph, m.add)
    assert operands is not None  # checked
    fused = r.op(
        "SkipSimplifiedLayerNormalization",
        *operands,
        m.scale,
        domain="com.microsoft",
        outputs=4,
        epsilon=_epsilon(norm),
    )
    out = r.outputs_of(fused)
    mapping = {norm.outputs[0]: out[0]}
    if len(norm.outputs) > 1 and norm.outputs[1] is not None:
        mapping[norm.outputs[1]] = out[2]  # SLN's inv_std_var is Skip*'s output 2
    if reads_elsewhere(r.graph, total, norm):
        mapping[total] = out[3]  # input_skip_bias_sum: the next residual Add reads it
    return {k: v for k, v in mapping.items() if k is not None}


def _residual_rule(norm_op: str) -> Rule:
    return Rule(
        f"fuse_add_into_{norm_op}",
        _residual_pattern(norm_op),
        _residual,
        check=_residual_check,
        targets="onnx-community Gemma: Add(residual, SLN(x)) -> SLN(sum), as onnxruntime-genai exports it fused",
    )


# ----- fuse_rms_norm_into_rotary ----------------------------------------------------------------
def _rotary_pattern() -> OpPattern:
    reshape = op.Reshape(Var("x"), Var(), _name="reshape")
    widen = op.Cast(reshape, _name="widen")
    norm = op.any_of(_NORMS, AnyOf(widen, reshape), Var("scale"), _name="norm", axis=Attr("axis", -1))
    unshape = op.Reshape(AnyOf(op.Cast(norm, _name="narrow"), norm), Var())
    return ms.RotaryEmbedding(unshape, Var("position_ids"), Var("cos"), Var("sin"), _where=_four_inputs)


def _four_inputs(graph: IrGraph, node: IrNode) -> bool:
    return len(node.inputs) == 4 and not is_folded(graph, node)


def _rotary_check(graph: IrGraph, m: Match) -> Decline | None:
    reason = _dtype_issue(graph, m) or _geometry_issue(graph, m)
    return None if reason is None else Decline(reason, m.norm)


def _dtype_issue(graph: IrGraph, m: Match) -> str | None:
    """The norm runs in x's dtype, or (float16 exports) in float32 between a widening and a narrowing Cast."""
    widen, narrow = getattr(m, "widen", None), getattr(m, "narrow", None)
    x, scale = graph.tensor(m.x), graph.tensor(m.scale)
    if (widen is None) != (narrow is None):
        return "a Cast on one side of the norm only"
    if widen is None or narrow is None:
        return None if scale.dtype == x.dtype else f"x is {x.dtype.short} but the scale {scale.dtype.short}"
    wide, back = graph.tensor(_out(widen)), graph.tensor(_out(narrow))
    if wide.dtype != DataType.FLOAT or scale.dtype != DataType.FLOAT or back.dtype != x.dtype:
        return f"the Casts take {x.dtype.short} to {wide.dtype.short} and back to {back.dtype.short}; expected f32 and back"
    return None


def _geometry_issue(graph: IrGraph, m: Match) -> str | None:
    rotary, norm = m.node, m.norm
    x, rows, rotated = (graph.tensor(t).shape for t in (m.x, _in(norm), _in(rotary)))
    if isinstance(x, Absent) or isinstance(rows, Absent) or isinstance(rotated, Absent) or len(rotated.dims) != 3:
        return "the rotary input is not 3-D [batch, sequence, heads * head]"
    if x.dims != rotated.dims:
        return f"x has shape {x} but the rotary input {rotated}: the reshapes are not a round trip"
    head, rank = rows.dims[-1], len(rows.dims)
    if m.axis not in (-1, rank - 1):
        return "the norm is not over the last axis"
    scale = graph.tensor(m.scale).shape
    if isinstance(scale, Absent) or dims_product(scale.dims) != head:
        return f"the scale {scale} is not one {head}-element head"
    cos = graph.tensor(m.cos).shape
    hidden, width = rotated.dims[2], None if isinstance(cos, Absent) else cos.dims[-1]
    if not isinstance(hidden, int) or not isinstance(width, int):
        return "the hidden size or the cache width is not static"
    attrs = rotary.attributes
    rotary_head = rotary_head_size(hidden, width, attrs.get("num_heads", 0), attrs.get("rotary_embedding_dim", 0))
    if head != rotary_head:
        return f"the norm's rows have {head} elements but the rotation's heads {rotary_head}"
    return None


def _rotary(r: Rewriter, m: Match) -> list[NewValue]:
    rotary = m.node
    attrs = {"epsilon": _epsilon(m.norm), **{k: rotary.attributes[k] for k in _ROTARY_ATTRS if k in rotary.attributes}}
    return [r.op("RmsNormRotary", m.x, m.position_ids, m.cos, m.sin, m.scale, domain=ONYXIA_DOMAIN, **attrs)]


def _in(node: IrNode) -> int:
    t = node.inputs[0]
    assert t is not None, f"node '{node.name}' matched with no input 0"
    return t


def _out(node: IrNode) -> int:
    t = node.outputs[0]
    assert t is not None, f"node '{node.name}' matched with no output 0"
    return t


# ----- helpers for the residual rule ------------------------------------------------------------
def input_and_skip(graph: IrGraph, add: IrNode) -> tuple[int, int] | None:
    """(input, skip): input has the sum's shape; skip is the same or a trailing suffix of it (the
    Skip* shader reads skip at ``index % numel(skip)``)."""
    a, b = add.inputs
    if a is None or b is None:
        return None
    dims = []
    for t in (_out(add), a, b):
        shape = graph.tensor(t).shape
        if isinstance(shape, Absent):
            return None
        dims.append(list(shape.dims))
    out, a_dims, b_dims = dims
    order = (a, b, b_dims) if a_dims == out else (b, a, a_dims) if b_dims == out else None
    if order is None:
        return None
    skip = list(order[2])
    while skip and skip[0] == 1:
        skip.pop(0)
    return (order[0], order[1]) if skip == out[len(out) - len(skip) :] else None


def reads_elsewhere(graph: IrGraph, total: int, norm: IrNode) -> bool:
    """Something besides the norm needs the sum: another reader, a graph output, shared storage."""
    others = [n for n, _ in graph.tensor_consumers(total) if n.id != norm.id]
    return bool(others) or graph.is_graph_output(total) or total in graph.aliases.values()


NORMALIZATION_FUSIONS = (
    _residual_rule("SimplifiedLayerNormalization"),
    _residual_rule("RMSNormalization"),
    Rule(
        "fuse_rms_norm_into_rotary",
        _rotary_pattern(),
        _rotary,
        check=_rotary_check,
        targets="onnx-community Gemma 3: Reshape -> SimplifiedLayerNormalization (q_norm/k_norm) -> Reshape -> RotaryEmbedding",
    ),
)
