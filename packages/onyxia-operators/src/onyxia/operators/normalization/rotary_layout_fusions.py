"""``rotate_before_transpose``: PyTorch's exporter rotates q and k after moving their heads first, ai.onnx
``RotaryEmbedding(Transpose(y, [0, 2, 1, 3]), cos, sin)`` with y the projection's [B, S, N, H] heads
(behind Qwen 3's per-head RMSNormalization when the model has one). Lowered, that is com.microsoft
RotaryEmbedding over a [B, N, S, H] copy. The rotation does not care where the heads sit, so it moves
before the Transpose, on y read as [B, S, N * H] (a Reshape, a view):

    Transpose(Reshape(RotaryEmbedding(Reshape(y, [0, 0, N * H]), ...), [0, 0, N, H]), [0, 2, 1, 3])

which is the graph the other layouts' fusions know: ``Reshape -> RMSNormalization -> Reshape ->
RotaryEmbedding`` becomes RmsNormRotary (one dispatch, q and k paired), and the Transpose left at the end
is read through by the attention (query: ScaledDotProductAttention's BSNH query; key and value: KvAppend's
BSNH rows). Declines: a rotary input that is not a 4-D Transpose of a [B, S, N, H] tensor with static N
and H (the position ids mean the same for the 3-D and the 4-D contrib op).

``norm_before_transpose``: Gemma 3 normalises q and k after moving their heads first,
``RMSNormalization(Transpose(y, [0, 2, 1, 3]), scale, axis=-1)``. A norm over the last axis alone does not
care where the other axes sit, so it becomes ``Transpose(RMSNormalization(y, scale, axis=-1))``: the
rotary behind it then sees the Transpose `rotate_before_transpose` moves, and the norm ends up folded into
the rotation (RmsNormRotary, then the q/k pair). Only the ai.onnx / onnxruntime RMS norms with one output
and a last-axis row; the Transpose must have no other reader (else it would run twice).
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, IrGraph, TensorKind, TensorValue
from onyxia.core.rewrite import Attr, Decline, Match, NewValue, Rewriter, Rule, Var, is_folded, ms, op
from onyxia.core.shapes import Absent, shape_of

__all__ = ["NORM_BEFORE_TRANSPOSE", "ROTARY_LAYOUT_FUSIONS", "ROTATE_BEFORE_TRANSPOSE"]


def _check(graph: IrGraph, m: Match) -> Decline | None:
    if is_folded(graph, m.node):
        return Decline("the rotation is folded", m.node)
    y = graph.tensor(m.y).shape
    if isinstance(y, Absent) or len(y.dims) != 4 or not all(isinstance(d, int) for d in y.dims[2:]):
        return Decline(f"the transposed input {y} is not [B, S, N, H] with static N and H", m.node)
    return None


def _shape(r: Rewriter, dims: list[int], label: str) -> int:
    graph = r.graph
    name = f"{label}/shape_{'x'.join(map(str, dims))}"
    value = np.asarray(dims, np.int64)
    stored = TensorValue.from_numpy(value, name)
    tensor = graph.add_tensor(name, DataType.INT64, shape_of([len(dims)]), TensorKind.INITIALIZER, initializer=stored)
    tensor.value = value
    return tensor.id


def _rewrite(r: Rewriter, m: Match) -> list[NewValue]:
    shape = r.graph.tensor(m.y).shape
    assert not isinstance(shape, Absent)  # checked
    heads, size = shape.dims[2:]
    assert isinstance(heads, int) and isinstance(size, int)  # checked
    rows = r.op("Reshape", m.y, _shape(r, [0, 0, heads * size], m.node.name))
    attrs = {**m.node.attributes, "num_heads": heads}
    rotated = r.op("RotaryEmbedding", rows, *m.node.inputs[1:], domain="com.microsoft", **attrs)
    split = r.op("Reshape", rotated, _shape(r, [0, 0, heads, size], m.node.name))
    return [r.op("Transpose", split, perm=[0, 2, 1, 3])]


ROTATE_BEFORE_TRANSPOSE = Rule(
    "rotate_before_transpose",
    ms.RotaryEmbedding(
        op.Transpose(Var("y"), perm=[0, 2, 1, 3]), Var("positions"), Var("cos"), Var("sin"), _extra_inputs=True
    ),
    _rewrite,
    check=_check,
    targets="torch.onnx.export(dynamo=True) opset 23: RotaryEmbedding(Transpose(q_norm(Reshape(q_proj(x)))))",
)


# ----- norm_before_transpose ----------------------------------------------------------------------
def _norm_check(graph: IrGraph, m: Match) -> Decline | None:
    y = graph.tensor(m.y).shape
    if isinstance(y, Absent) or len(y.dims) != 4:
        return Decline(f"the transposed input {y} is not 4-D", m.node)
    if m.axis not in (-1, 3) or len([t for t in m.node.outputs if t is not None]) != 1:
        return Decline(f"the norm is over axis {m.axis} or writes its statistics, not one last-axis row", m.node)
    return None


def _norm_first(r: Rewriter, m: Match) -> list[NewValue]:
    attrs = {**m.node.attributes, "axis": -1}
    normed = r.op(m.node.op_type, m.y, m.scale, *m.node.inputs[2:], domain=m.node.domain, **attrs)
    return [r.op("Transpose", normed, perm=[0, 2, 1, 3])]


NORM_BEFORE_TRANSPOSE = Rule(
    "norm_before_transpose",
    op.any_of(("RMSNormalization",), op.Transpose(Var("y"), perm=[0, 2, 1, 3]), Var("scale"), axis=Attr("axis", -1)),
    _norm_first,
    check=_norm_check,
    targets="torch.onnx.export(dynamo=True) Gemma 3: q_norm(Transpose(Reshape(q_proj(x)))) before RotaryEmbedding",
)

ROTARY_LAYOUT_FUSIONS = (ROTATE_BEFORE_TRANSPOSE, NORM_BEFORE_TRANSPOSE)
