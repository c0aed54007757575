"""Rewrite rules that turn a plain-op rotate-half RoPE (optimum's exports) into one ApplyRotaryPosEmb dispatch.

optimum exports Hugging Face's ``apply_rotary_pos_emb`` as it is written: per layer and for q and k,
``Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, H/2, end)), Slice(x, 0, H/2), axis=-1), sin))`` on
``x = Transpose(Reshape(proj, [B, S, N, H]), perm=[0, 2, 1, 3])``, cos/sin the step's [B, S, H] tables
unsqueezed to [B, 1, S, H] (the H/2 bounds are Shape/Gather/Div chains that constant folding has made
known). Five to six dispatches a tensor; the rules make it one, in steps that each keep the graph valid:

- ``fuse_rotate_half``: the pattern above becomes ``ApplyRotaryPosEmb(x, cos, sin)``. Declines: a dtype
  other than float32 (a float16 graph rounds after each Mul and the Add, the kernel once); x not 4-D with a
  static even last dim; a Mul whose result is not x's shape (cos/sin would grow it); slices that are not
  the two halves of the last axis (bounds unknown, a step, another axis); a Concat on another axis.
- ``fold_partial_rotary``: Phi-3 rotates the first R features only, ``Concat(rope(Slice(x, 0, R)),
  Slice(x, R, end), axis=-1)``; the op takes the whole x with ``rotary_dim=R``.
- ``fold_transpose_into_rotary``: ``ApplyRotaryPosEmb(Transpose(x, perm=[0, 2, 1, 3]))`` reads the
  [B, S, N, H] Reshape directly (``transpose_input=1``); its output stays [B, N, S, H].
- ``fold_rms_norm_into_rotary``: Qwen 3 and Gemma 3 normalise q and k per head (q_norm/k_norm: a
  SimplifiedLayerNormalization over the last axis, before or after the Transpose, between identity Casts
  in the float32 exports) before RoPE; the op takes the norm's scale and epsilon. Declines: a norm over
  another axis, a scale that is not one head, a Cast that changes the dtype.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode
from onyxia.core.rewrite import AnyOf, Attr, Decline, Match, NewValue, OpPattern, Ops, Rewriter, Rule, Var, is_folded
from onyxia.core.rewrite import op as onnx_op
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["ROTATE_HALF_FUSIONS"]

_OP = "ApplyRotaryPosEmb"
_onyxia = Ops(ONYXIA_DOMAIN)
_NORMS = ("SimplifiedLayerNormalization", "RMSNormalization")
_NORM_EPSILON = 1e-5  # both norms' default
_BSNH = [0, 2, 1, 3]


def _slice(name: str, *, shared: bool = False) -> OpPattern:
    """``Slice(x, starts, ends, axes[, steps])``: bounds bound as `name`_starts, ... for the check."""
    bounds = (Var(f"{name}_starts"), Var(f"{name}_ends"), Var(f"{name}_axes"))
    return onnx_op.Slice(Var("x"), *bounds, _name=name, _extra_inputs=True, _shared=shared)


def _dims(graph: IrGraph, t: int | None) -> tuple | None:
    shape = None if t is None else graph.tensor(t).shape
    return None if shape is None or isinstance(shape, Absent) else tuple(shape.dims)


def _head(graph: IrGraph, t: int) -> int | None:
    """The static last dim of a 4-D tensor (the head size), else None."""
    dims = _dims(graph, t)
    return dims[3] if dims is not None and len(dims) == 4 and isinstance(dims[3], int) else None


def _slice_range(graph: IrGraph, m: Match, name: str, length: int) -> tuple[int, int] | None:
    """[start, end) of a one-axis, step-1 Slice on the last of 4 axes, clamped as ONNX clamps; None
    when the bounds are not known or the Slice is anything else."""
    node: IrNode = getattr(m, name)
    values = [graph.tensor(getattr(m, f"{name}_{k}")).value for k in ("starts", "ends", "axes")]
    steps = node.inputs[4] if len(node.inputs) > 4 else None
    if steps is not None:
        values.append(graph.tensor(steps).value)
    if any(v is None or np.size(v) != 1 for v in values):
        return None
    start, end, axis, *step = (int(np.asarray(v).reshape(-1)[0]) for v in values)
    if axis not in (-1, 3) or step not in ([], [1]):
        return None
    start, end = (v + length if v < 0 else v for v in (start, end))
    return min(max(start, 0), length), min(max(end, 0), length)


def _last_axis(axis: int, rank: int = 4) -> bool:
    return axis in (-1, rank - 1)


# ----- fuse_rotate_half ---------------------------------------------------------------------------
def _rotate_half_pattern() -> OpPattern:
    rotated = onnx_op.Concat(onnx_op.Neg(_slice("second")), _slice("first"), _name="concat", axis=Attr("axis"))
    x_cos = onnx_op.Mul(Var("x"), Var("cos"), _commute=True, _name="mul_cos")
    rot_sin = onnx_op.Mul(rotated, Var("sin"), _commute=True, _name="mul_sin")
    return onnx_op.Add(x_cos, rot_sin, _commute=True, _where=lambda g, n: not is_folded(g, n))


def _rotate_half_check(graph: IrGraph, m: Match) -> Decline | None:
    x, tensors = graph.tensor(m.x), (m.x, m.cos, m.sin, m.node.outputs[0])
    if any(graph.tensor(t).dtype != DataType.FLOAT for t in tensors if t is not None):
        return Decline("not float32: a float16 graph rounds after each Mul and the Add, the fused kernel once", x)
    head = _head(graph, m.x)
    if head is None or head % 2:
        return Decline(f"x has shape {x.shape}; expected 4-D with a static even last dim", x)
    for mul in (m.mul_cos, m.mul_sin, m.node):
        if _dims(graph, mul.outputs[0]) != _dims(graph, m.x):
            grown = graph.tensor(mul.outputs[0]).shape
            return Decline(f"the product is {grown}, not x's {x.shape}: cos/sin broadcast beyond x", mul)
    halves = (_slice_range(graph, m, "first", head), _slice_range(graph, m, "second", head))
    if halves != ((0, head // 2), (head // 2, head)):
        return Decline(f"the slices are not x[..., :{head // 2}] and x[..., {head // 2}:] with known bounds", m.first)
    if not _last_axis(m.axis):
        return Decline(f"the Concat joins axis {m.axis}, not the last", m.concat)
    return None


def _rotate_half(r: Rewriter, m: Match) -> list[NewValue]:
    return [r.op(_OP, m.x, m.cos, m.sin, domain=ONYXIA_DOMAIN)]


# ----- fold_partial_rotary ------------------------------------------------------------------------
def _whole_head(graph: IrGraph, node: IrNode) -> bool:
    attrs = node.attributes
    return attrs.get("rotary_dim", 0) == 0 and attrs.get("transpose_input", 0) == 0


def _partial_pattern() -> OpPattern:
    # shared: until Cleanup, the folded Shape(x[..., :R]) that gave the halves' bound still reads the Slice
    rotated = _slice("rotated", shared=True)
    rope = _onyxia.ApplyRotaryPosEmb(rotated, Var("cos"), Var("sin"), _name="rope", _where=_whole_head)
    return onnx_op.Concat(rope, _slice("passed"), axis=Attr("axis"))


def _rotary_dim(graph: IrGraph, m: Match) -> int | None:
    """R when the slices are x[..., :R] and x[..., R:] of a 4-D x with a static head, R even."""
    head = _head(graph, m.x)
    rotated = None if head is None else _slice_range(graph, m, "rotated", head)
    if head is None or rotated is None or rotated[0] != 0 or rotated[1] % 2:
        return None
    return rotated[1] if _slice_range(graph, m, "passed", head) == (rotated[1], head) else None


def _partial_check(graph: IrGraph, m: Match) -> Decline | None:
    if _rotary_dim(graph, m) is None:
        return Decline(f"the slices are not x[..., :R] and x[..., R:] of {graph.tensor(m.x).shape}, R even", m.rotated)
    if not _last_axis(m.axis):
        return Decline(f"the Concat joins axis {m.axis}, not the last", m.node)
    return None


def _partial(r: Rewriter, m: Match) -> list[NewValue]:
    return [r.op(_OP, m.x, m.cos, m.sin, domain=ONYXIA_DOMAIN, rotary_dim=_rotary_dim(r.graph, m))]


# ----- fold_transpose_into_rotary -----------------------------------------------------------------
def _reads_bnsh(graph: IrGraph, node: IrNode) -> bool:
    return node.attributes.get("transpose_input", 0) == 0


def _transpose_pattern() -> OpPattern:
    transpose = onnx_op.Transpose(Var("x"), perm=_BSNH, _shared=True)
    return _onyxia.ApplyRotaryPosEmb(transpose, Var("cos"), Var("sin"), _extra_inputs=True, _where=_reads_bnsh)


def _transpose(r: Rewriter, m: Match) -> list[NewValue]:
    node = m.node
    attrs = {**node.attributes, "transpose_input": 1}
    return [r.op(_OP, m.x, *node.inputs[1:], domain=ONYXIA_DOMAIN, **attrs)]


# ----- fold_rms_norm_into_rotary ------------------------------------------------------------------
def _norm_pattern() -> OpPattern:
    x = AnyOf(onnx_op.Cast(Var("x"), _name="widen"), Var("x"))
    norm = onnx_op.any_of(_NORMS, x, Var("scale"), _name="norm", axis=Attr("axis", -1))
    normed = AnyOf(onnx_op.Cast(norm, _name="narrow"), norm)
    return _onyxia.ApplyRotaryPosEmb(normed, Var("cos"), Var("sin"))


def _norm_check(graph: IrGraph, m: Match) -> Decline | None:
    for cast in (getattr(m, "widen", None), getattr(m, "narrow", None)):
        if cast is not None and graph.tensor(cast.inputs[0]).dtype != graph.tensor(cast.outputs[0]).dtype:
            return Decline("a Cast around the norm changes the dtype", cast)
    head = _head(graph, m.x)
    if head is None or not _last_axis(m.axis):
        return Decline(f"the norm is over axis {m.axis} of {graph.tensor(m.x).shape}, not the heads' last axis", m.norm)
    scale = graph.tensor(m.scale)
    if isinstance(scale.shape, Absent) or dims_product(scale.shape.dims) != head:
        return Decline(f"the scale {scale.shape} is not one {head}-element head", scale)
    if scale.dtype != graph.tensor(m.x).dtype:
        return Decline(f"x is {graph.tensor(m.x).dtype.short} but the scale {scale.dtype.short}", scale)
    return None


def _norm(r: Rewriter, m: Match) -> list[NewValue]:
    epsilon = float(np.float32(m.norm.attributes.get("epsilon", _NORM_EPSILON)))
    attrs = {**m.node.attributes, "epsilon": epsilon}
    return [r.op(_OP, m.x, m.cos, m.sin, m.scale, domain=ONYXIA_DOMAIN, **attrs)]


ROTATE_HALF_FUSIONS: tuple[Rule, ...] = (
    Rule(
        "fuse_rotate_half",
        _rotate_half_pattern(),
        _rotate_half,
        check=_rotate_half_check,
        targets="optimum (all families): Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, H/2, end)), Slice(x, 0, H/2)), sin))",
    ),
    Rule(
        "fold_partial_rotary",
        _partial_pattern(),
        _partial,
        check=_partial_check,
        targets="optimum Phi-3: Concat(rope(Slice(x, 0, R)), Slice(x, R, end), axis=-1)",
    ),
    Rule(
        "fold_transpose_into_rotary",
        _transpose_pattern(),
        _transpose,
        targets="optimum: q/k = Transpose(Reshape(proj, [B, S, N, H]), perm=[0, 2, 1, 3]) before RoPE",
    ),
    Rule(
        "fold_rms_norm_into_rotary",
        _norm_pattern(),
        _norm,
        check=_norm_check,
        targets="optimum Qwen 3 / Gemma 3: q_norm/k_norm (SimplifiedLayerNormalization per head) before RoPE",
    ),
)
