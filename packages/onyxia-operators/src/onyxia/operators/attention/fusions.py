"""Rewrite rules that produce ScaledDotProductAttention from plain attention (optimum's exports).

- ``fuse_attention``: ``MatMul(Where(IsNaN(p), 0, p), v_rep)`` with ``p = Softmax(Add(scores, mask))`` and
  ``scores = MatMul(Mul(q, cq), Mul(Transpose(k_rep, [0, 1, 3, 2]), ck))`` (or ``MatMulTransB(q, k_rep)``, ``Div``/``Mul`` of the
  product by a constant, or no scaling; optionally soft-capped as ``Mul(Tanh(Div(x, c)), c)``; the mask
  Add and the NaN Where optional; a mask ``Where(cond, a, b)`` of two constants is read as the bool cond) becomes one com.onyxia ScaledDotProductAttention reading q, the
  caches and the mask directly. ``k_rep``/``v_rep`` are the repeat-kv copies
  ``Reshape(Expand(Unsqueeze(k, 2), [B, KV, G, T, H]), [B, KV * G, T, H])``, whose grouped heads the op
  reads without the copy (or k/v themselves when kv heads == heads, or MatMul broadcasts one kv head).
  Exact: every constant is applied where the graph applies it, the mask is the graph's tensor, the
  softmax is onnxruntime's over every key. Declines (with the reason): a dtype other than float32, a
  scale that is not one float, a Softmax not over the last axis, a NaN Where that does not write 0, a
  repeat whose shapes are not [B, KV, G, T, H] -> [B, KV * G, T, H], a mask that broadcasts the scores.
- ``fold_transpose_into_attention``: ``Transpose(ScaledDotProductAttention(...), [0, 2, 1, 3])`` (the
  heads back to [B, S, N, H] before o_proj) becomes the op writing that layout (transpose_output=1).
- ``identity_slice``: a Slice from 0 with step 1 whose output has its input's shape is its input
  (optimum's per-layer ``mask[:, :, :, :T]``), so the mask needs no copy per layer.
- ``shape_of_reshape``: ``Shape(Reshape(x, target))`` with target a known shape with no 0 or -1 is the
  target itself; optimum slices its mask with ``k_rep.shape[-2]``, a read that would keep the repeat-kv
  copy alive after the fusion.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode, SymbolicExpr
from onyxia.core.rewrite import AnyOf, Attr, Const, Decline, Match, NewValue, Ops, Rewriter, Rule, Var, is_folded, op
from onyxia.core.shapes import Absent
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["ATTENTION_FUSIONS", "FOLD_TRANSPOSE_INTO_ATTENTION", "FUSE_ATTENTION", "IDENTITY_SLICE", "SHAPE_OF_RESHAPE"]

_SDPA = "ScaledDotProductAttention"


# ----- shape_of_reshape -------------------------------------------------------------------------
def _plain_shape(graph: IrGraph, node: IrNode) -> bool:
    return "start" not in node.attributes and "end" not in node.attributes


def _shape_check(graph: IrGraph, m: Match) -> Decline | None:
    target = graph.tensor(m.target).value
    if target is None or target.ndim != 1:
        return Decline("the Reshape target is not a known 1-D shape", m.reshape)
    if not all(isinstance(d, SymbolicExpr) or (int(d) > 0) for d in target.tolist()):
        return Decline("the Reshape target holds 0 or -1: the output shape is not the target", m.reshape)
    return None


SHAPE_OF_RESHAPE = Rule(
    "shape_of_reshape",
    op.Shape(op.Reshape(Var(), Const("target"), _name="reshape", _shared=True), _where=_plain_shape),
    lambda r, m: [m.target],
    check=_shape_check,
    targets="optimum: the mask Slice reads k_rep.shape[-2] of the repeat-kv Reshape",
)


# ----- identity_slice ---------------------------------------------------------------------------
def _identity_check(graph: IrGraph, m: Match) -> Decline | None:
    node = m.node
    x, y = _dims(graph, m.x), _dims(graph, node.outputs[0])
    if x is None or x != y:
        return Decline("the Slice changes the shape", node)
    starts = graph.tensor(m.starts).value
    if starts is None or not _all_equal(starts, 0):
        return Decline("the Slice does not start at 0 on every axis it slices", node)
    steps = node.inputs[4] if len(node.inputs) > 4 else None
    if steps is not None and not _all_equal(graph.tensor(steps).value, 1):
        return Decline("the Slice has a step other than 1", node)
    return None


def _all_equal(value: np.ndarray | None, expected: int) -> bool:
    entries = [] if value is None else np.asarray(value).reshape(-1).tolist()
    return value is not None and all(not isinstance(v, SymbolicExpr) and int(v) == expected for v in entries)


IDENTITY_SLICE = Rule(
    "identity_slice",
    op.Slice(Var("x"), Const("starts"), Var(), _extra_inputs=True, _where=lambda g, n: not is_folded(g, n)),
    lambda r, m: [m.x],
    check=_identity_check,
    targets="optimum: the per-layer mask[:, :, :, :T] of the model's [B, 1, S, T] mask",
)


# ----- fuse_attention ---------------------------------------------------------------------------
def _repeat(tag: str) -> AnyOf:
    unsqueeze = op.Unsqueeze(Var(tag), _name=f"unsqueeze_{tag}", _extra_inputs=True)
    expand = op.Expand(unsqueeze, Var(), _name=f"expand_{tag}")
    return AnyOf(op.Reshape(expand, Var(), _name=f"repeat_{tag}"), Var(tag))


def _attention_pattern() -> object:
    k_t = op.Transpose(_repeat("k"), _name="transpose", perm=Attr("perm"))
    q = AnyOf(op.Mul(Var("q"), Const("q_scale"), _name="q_mul", _commute=True), Var("q"))
    k = AnyOf(op.Mul(k_t, Const("k_scale"), _name="k_mul", _commute=True), k_t)
    transposed_b = Ops(ONYXIA_DOMAIN).MatMulTransB(q, _repeat("k"), _name="qk")  # FoldTransposeIntoMatMul's
    product = AnyOf(op.MatMul(q, k, _name="qk"), transposed_b)
    scaled = AnyOf(
        op.Mul(product, Const("scale"), _name="scale_mul", _commute=True),
        op.Div(product, Const("divisor"), _name="divide"),
        product,
    )
    capped = AnyOf(
        op.Mul(op.Tanh(op.Div(scaled, Const("cap_in"), _name="cap_div")), Const("cap_out"), _commute=True),
        scaled,
    )
    select = op.Where(Var("mask"), Const("mask_true"), Const("mask_false"), _name="mask_where")
    masked = AnyOf(op.Add(capped, AnyOf(select, Var("mask")), _name="mask_add", _commute=True), capped)
    probs = op.Softmax(masked, _name="softmax", axis=Attr("axis", None))
    cleaned = AnyOf(op.Where(op.IsNaN(probs), Const("zero"), Var("p"), _name="nan_where"), probs)
    return op.MatMul(cleaned, _repeat("v"), _where=lambda g, n: not is_folded(g, n))


def _dims(graph: IrGraph, t: int | None) -> tuple[object, ...] | None:
    if t is None:
        return None
    shape = graph.tensor(t).shape
    return None if isinstance(shape, Absent) else tuple(shape.dims)


def _one_float(graph: IrGraph, t: int) -> float | None:
    tensor = graph.tensor(t)
    value = tensor.value if tensor.value is not None else tensor.initializer.numpy() if tensor.initializer else None
    if value is None or tensor.dtype != DataType.FLOAT or np.size(value) != 1:
        return None
    return float(np.asarray(value, dtype=np.float32).reshape(()))


def _attention_check(graph: IrGraph, m: Match) -> Decline | None:
    reason = _dtype_issue(graph, m) or _constant_issue(graph, m) or _shape_issue(graph, m)
    return None if reason is None else Decline(reason, m.node)


def _dtype_issue(graph: IrGraph, m: Match) -> str | None:
    tensors = [("q", m.q), ("k", m.k), ("v", m.v)]
    mask = getattr(m, "mask", None)
    if mask is not None and getattr(m, "mask_where", None) is not None:
        if graph.tensor(mask).dtype != DataType.BOOL:
            return f"the mask's Where condition is {graph.tensor(mask).dtype.short}, not bool"
    elif mask is not None:
        tensors.append(("mask", mask))
    for role, t in tensors:
        if graph.tensor(t).dtype != DataType.FLOAT:
            return f"{role} is {graph.tensor(t).dtype.short}; the fused kernel keeps f32 scores (f32 graphs only)"
    return None


def _constant_issue(graph: IrGraph, m: Match) -> str | None:
    for name in ("q_scale", "k_scale", "scale", "divisor", "cap_in", "cap_out", "zero", "mask_true", "mask_false"):
        t = getattr(m, name, None)
        if t is not None and _one_float(graph, t) is None:
            return f"the {name} constant is not one float32 value"
    cap_in, cap_out = getattr(m, "cap_in", None), getattr(m, "cap_out", None)
    if cap_in is not None and cap_out is not None:
        softcap = _one_float(graph, cap_in)
        if softcap != _one_float(graph, cap_out) or softcap is None or softcap <= 0:
            return "the soft-cap is not c * tanh(x / c) with one positive c"
    zero = getattr(m, "zero", None)
    if zero is not None and (m.p != m.softmax.outputs[0] or _one_float(graph, zero) != 0.0):
        return "the Where after the Softmax does not replace NaN probabilities by 0"
    axis = m.axis if m.axis is not None else (-1 if m.softmax.opset >= 13 else 1)
    if axis not in (-1, 3):
        return f"the Softmax is over axis {axis}, not the last axis of the 4-D scores"
    perm = getattr(m, "perm", [0, 1, 3, 2])  # none with MatMulTransB
    if list(perm) != [0, 1, 3, 2]:
        return f"k is transposed by {list(perm)}, not [0, 1, 3, 2]"
    return None


def _shape_issue(graph: IrGraph, m: Match) -> str | None:
    q, k, v, scores, y = (_dims(graph, t) for t in (m.q, m.k, m.v, m.qk.outputs[0], m.node.outputs[0]))
    if q is None or k is None or v is None or scores is None or y is None:
        return "a shape is not inferred"
    if len(q) != 4 or len(k) != 4 or len(v) != 4 or len(y) != 4:
        return f"q {list(q)}, k {list(k)}, v {list(v)} are not all 4-D"
    heads = q[1]
    if k[0] != q[0] or v[0] != q[0] or k[3] != q[3] or v[2] != k[2]:
        return f"q {list(q)}, k {list(k)} and v {list(v)} are not [B, N, S, H], [B, KV, T, H], [B, KV, T, Hv]"
    if scores != (q[0], heads, q[2], k[2]) or y != (q[0], heads, q[2], v[3]):
        return f"the scores {list(scores)} or the output {list(y)} are not [B, N, S, T] / [B, N, S, Hv]"
    for tag, kv in (("k", k), ("v", v)):
        reason = _repeat_issue(graph, m, tag, kv, heads)
        if reason:
            return reason
    mask_add, mask_where = getattr(m, "mask_add", None), getattr(m, "mask_where", None)
    if mask_where is not None and _dims(graph, mask_where.outputs[0]) != _dims(graph, m.mask):
        return "the mask's Where broadcasts its condition to another shape"
    if mask_add is not None:
        mask = _dims(graph, m.mask)
        if mask is None or len(mask) > 4 or _dims(graph, mask_add.outputs[0]) != scores:
            return f"the mask {mask} broadcasts the scores {list(scores)} or has rank above 4"
        if any(d not in (1, s) for d, s in zip(mask[::-1], scores[::-1])):
            return f"the mask {list(mask)} does not broadcast to the scores {list(scores)}"
    transpose = getattr(m, "transpose", None)
    k_t = None if transpose is None else _dims(graph, transpose.outputs[0])
    expected = {"q_mul": q, "k_mul": k_t, "scale_mul": scores, "divide": scores}
    expected.update(softmax=scores, nan_where=scores)
    for name, dims in expected.items():
        node = getattr(m, name, None)
        if node is not None and _dims(graph, node.outputs[0]) != dims:
            return f"'{node.name}' broadcasts its operand to another shape"
    return None


def _repeat_issue(graph: IrGraph, m: Match, tag: str, kv: tuple[object, ...], heads: object) -> str | None:
    """kv is [B, KV, T, H] read by `heads` query heads: directly (KV == heads, or one broadcast kv
    head), or through the repeat [B, KV, 1, T, H] -> [B, KV, G, T, H] -> [B, KV * G, T, H]."""
    if not isinstance(heads, int) or not isinstance(kv[1], int) or kv[1] <= 0 or heads % kv[1]:
        return f"{heads} query heads do not group over {kv[1]} {tag} heads (static counts needed)"
    repeat = getattr(m, f"repeat_{tag}", None)
    if repeat is None:
        return None
    unsqueeze, expand = getattr(m, f"unsqueeze_{tag}"), getattr(m, f"expand_{tag}")
    axes = unsqueeze.attributes.get("axes")
    if axes is None and len(unsqueeze.inputs) > 1 and unsqueeze.inputs[1] is not None:
        axes = graph.tensor(unsqueeze.inputs[1]).value
    if axes is None or [int(a) for a in np.asarray(axes).reshape(-1)] not in ([2], [-3]):
        return f"the repeat-kv Unsqueeze of {tag} is not at axis 2"
    expanded, repeated = _dims(graph, expand.outputs[0]), _dims(graph, repeat.outputs[0])
    group = heads // kv[1]
    if expanded != (kv[0], kv[1], group, kv[2], kv[3]) or repeated != (kv[0], heads, kv[2], kv[3]):
        return (
            f"the repeat-kv of {tag} goes {list(kv)} -> {expanded} -> {repeated}, not [B, KV, G, T, H] -> [B, N, T, H]"
        )
    return None


def _attention(r: Rewriter, m: Match) -> list[NewValue]:
    attrs: dict[str, Any] = {}
    for name in ("q_scale", "k_scale", "scale", "divisor"):
        t = getattr(m, name, None)
        if t is not None:
            attrs[name] = _one_float(r.graph, t)
    if getattr(m, "cap_in", None) is not None:
        attrs["softcap"] = _one_float(r.graph, m.cap_in)
    if getattr(m, "zero", None) is not None:
        attrs["zero_nan_rows"] = 1
    if getattr(m, "mask_where", None) is not None:
        attrs.update(mask_true=_one_float(r.graph, m.mask_true), mask_false=_one_float(r.graph, m.mask_false))
    mask = getattr(m, "mask", None)
    inputs = (m.q, m.k, m.v, *([mask] if mask is not None else []))
    return [r.op(_SDPA, *inputs, domain=ONYXIA_DOMAIN, **attrs)]


FUSE_ATTENTION = Rule(
    "fuse_attention",
    _attention_pattern(),  # type: ignore[arg-type]
    _attention,
    check=_attention_check,
    targets="optimum: MatMul(Where(IsNaN(p), 0, p), v_rep), p = Softmax(MatMul(q*c, k_rep^T*c) + mask)",
)


# ----- fold_transpose_into_attention ------------------------------------------------------------
def _untransposed(graph: IrGraph, node: IrNode) -> bool:
    return not node.attributes.get("transpose_output", 0)


FOLD_TRANSPOSE_INTO_ATTENTION = Rule(
    "fold_transpose_into_attention",
    op.Transpose(
        Ops(ONYXIA_DOMAIN).ScaledDotProductAttention(
            Var("q"), Var("k"), Var("v"), _name="sdpa", _extra_inputs=True, _where=_untransposed
        ),
        perm=[0, 2, 1, 3],
    ),
    lambda r, m: [r.op(_SDPA, *m.sdpa.inputs, domain=ONYXIA_DOMAIN, **{**m.sdpa.attributes, "transpose_output": 1})],
    targets="optimum: Transpose(attention, [0, 2, 1, 3]) before the o_proj Reshape",
)

ATTENTION_FUSIONS = (SHAPE_OF_RESHAPE, IDENTITY_SLICE, FUSE_ATTENTION, FOLD_TRANSPOSE_INTO_ATTENTION)
