"""Rewrite rules that turn a plain-op RMSNorm (optimum's exports) into SimplifiedLayerNormalization.

- ``fuse_rms_norm``: ``Mul(scale, Cast?(x * 1 / Sqrt(ReduceMean(x^2, [-1]) + eps)))`` becomes
  ``SimplifiedLayerNormalization(x, scale, axis=-1, epsilon=eps)``, the node onnxruntime-genai exports,
  so the residual (`fuse_add_into_SimplifiedLayerNormalization`) and rotary fusions that follow see it.
  What transformers' RMSNorm traces to under torch.onnx: Llama, Mistral, Qwen 2/3 and Phi 3 export
  ``Mul(w, Cast(Mul(x, Div(1, Sqrt(Add(ReduceMean(Pow(x, 2)), eps))))))``; Gemma 2/3 ``Mul(Mul(x, ...),
  w)`` with ``1 + w`` already folded into the initializer (a ``1 + w`` Add of constants is folded before
  this pass, so the scale is any tensor of the right shape). Qwen 3 and Gemma 3 also normalise q and
  k over head_dim of a [B, S, N, H] (or [B, N, S, H]) tensor: the same pattern on the last axis.
  Variants matched: ``Mul(x, x)`` for ``Pow(x, 2)``; ReduceMean's axes as input (opset 18) or attribute;
  ``Reciprocal(Sqrt)`` or ``Pow(var, -0.5)`` for ``Div(1, Sqrt)``; ``Div(x, Sqrt)`` for the product;
  the Cast before the weight present or not; either operand order of each Mul and of the eps Add.

  Declines (with the reason): a reduction not over exactly the last axis, or with keepdims=0; an
  exponent, numerator or power other than 2, 1 and -0.5; an epsilon that is not one known float; a
  scale whose shape (leading 1s dropped) is not the last dim; any dtype other than float32 in the
  match (x, every intermediate, the scale, the result). That last rule is the rounding argument:
  the kernel reduces in f32 and rounds once to the output dtype, so only a norm the graph computes
  wholly in f32 ends with the same rounding. In float16 exports the Llama form runs the norm in f32
  between Casts but the weight Mul in f16 (``Mul(w16, Cast(n32, to=f16))``, two roundings): it is
  declined. Gemma's form multiplies by the weight in f32 and casts after: the match (x being the
  widening Cast's output) is all f32 and fuses, the narrowing Cast stays outside it.
- ``drop_identity_cast``: ``Cast(x, to=dtype(x))`` is ``x``. optimum's RMSNorm starts with
  ``hidden_states.to(float32)``, in an f32 graph a Cast to the dtype x has: it stood between the
  residual Add and the norm (so `fuse_add_into_SimplifiedLayerNormalization` saw no Add) and, on the
  first layer, between the embedding and both the norm and the residual, one dispatch of its own.
  Declines (by the engine) where the Cast's output is a graph output or shared storage.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode
from onyxia.core.rewrite import (
    AnyOf,
    Attr,
    Const,
    Decline,
    Match,
    NewValue,
    OpPattern,
    Rewriter,
    Rule,
    Var,
    is_folded,
    op,
)
from onyxia.core.shapes import Absent

__all__ = ["DROP_IDENTITY_CAST", "FUSE_RMS_NORM", "RMS_NORM_FUSIONS"]

_CONSTANTS = (("exponent", 2.0, "the square's exponent"), ("one", 1.0, "the numerator"), ("power", -0.5, "the power"))


def _identity_cast(graph: IrGraph, node: IrNode) -> bool:
    source, result = node.inputs[0], node.outputs[0]
    return source is not None and result is not None and graph.tensor(source).dtype == graph.tensor(result).dtype


def _live_identity_cast(graph: IrGraph, node: IrNode) -> bool:
    return _identity_cast(graph, node) and not is_folded(graph, node)


def _pattern() -> OpPattern:
    x = Var("x")  # an identity Cast in front is dropped by drop_identity_cast; a widening one is x
    square = AnyOf(op.Pow(x, Const("exponent"), _name="square"), op.Mul(x, x, _name="square"))
    keepdims = Attr("keepdims", 1)
    mean = AnyOf(
        op.ReduceMean(square, Const("axes"), _name="mean", keepdims=keepdims),
        op.ReduceMean(square, _name="mean", axes=Attr("axes_attr"), keepdims=keepdims),
    )
    variance = op.Add(mean, Const("epsilon"), _name="add_epsilon", _commute=True)
    root = op.Sqrt(variance, _name="sqrt")
    inverse = AnyOf(
        op.Div(Const("one"), root, _name="inverse"),
        op.Reciprocal(root, _name="inverse"),
        op.Pow(variance, Const("power"), _name="inverse"),
    )
    normed = AnyOf(op.Mul(x, inverse, _name="normalize", _commute=True), op.Div(x, root, _name="normalize"))
    narrowed = AnyOf(op.Cast(normed, _name="narrow"), normed)
    return op.Mul(narrowed, Var("scale"), _commute=True, _where=lambda g, n: not is_folded(g, n))


def _check(graph: IrGraph, m: Match) -> Decline | None:
    reason = _constant_issue(graph, m) or _axis_issue(graph, m) or _dtype_issue(graph, m) or _scale_issue(graph, m)
    return None if reason is None else Decline(reason, m.node)


def _constant_issue(graph: IrGraph, m: Match) -> str | None:
    for name, expected, what in _CONSTANTS:
        t = getattr(m, name, None)
        if t is not None and not _is_scalar(graph.tensor(t).value, expected):
            return f"{what} is {_show(graph.tensor(t).value)}, not {expected}: not an RMSNorm"
    if _epsilon(graph, m) is None:
        return f"epsilon is {_show(graph.tensor(m.epsilon).value)}; expected one known float"
    return None


def _axis_issue(graph: IrGraph, m: Match) -> str | None:
    x = graph.tensor(m.x).shape
    if isinstance(x, Absent) or not x.dims:
        return "x has no known rank (expected a tensor of rank >= 1)"
    rank = len(x.dims)
    axes = _axes(graph, m)
    if axes is None or len(axes) != 1 or not -rank <= axes[0] < rank or axes[0] % rank != rank - 1:
        return f"ReduceMean's axes are {axes}; expected the last axis of a rank-{rank} input"
    if m.keepdims != 1:
        return "ReduceMean has keepdims=0: the statistics do not broadcast back over the row"
    return None


def _dtype_issue(graph: IrGraph, m: Match) -> str | None:
    tensors = [m.x, m.scale, *(t for n in m.nodes for t in n.outputs if t is not None)]
    found = sorted({graph.tensor(t).dtype.short for t in tensors})
    if found != [DataType.FLOAT.short]:
        return (
            f"the match computes in {', '.join(found)}; only a norm wholly in f32 (x, steps, scale, result) "
            "rounds as the fused op does"
        )
    return None


def _scale_issue(graph: IrGraph, m: Match) -> str | None:
    x, scale = graph.tensor(m.x).dims, graph.tensor(m.scale).shape
    if isinstance(scale, Absent):
        return "the scale's shape is unknown"
    dims = list(scale.dims)
    if len(dims) > len(x):
        return f"the scale {scale} has a higher rank than x {graph.tensor(m.x).shape}"
    while dims and dims[0] == 1:
        dims.pop(0)
    if dims != [x[-1]]:
        return f"the scale {scale} is not the last dim {x[-1]} (leading 1s aside)"
    return None


def _axes(graph: IrGraph, m: Match) -> list[int] | None:
    if getattr(m, "axes", None) is not None:
        value = graph.tensor(m.axes).value
        return None if value is None else [int(a) for a in np.asarray(value).reshape(-1)]
    return [int(a) for a in m.axes_attr]


def _epsilon(graph: IrGraph, m: Match) -> float | None:
    value = graph.tensor(m.epsilon).value
    if value is None or value.size != 1 or value.dtype.kind != "f":
        return None
    return float(np.float32(value.reshape(-1)[0]))


def _is_scalar(value: np.ndarray | None, expected: float) -> bool:
    return value is not None and value.size == 1 and float(value.reshape(-1)[0]) == expected


def _show(value: np.ndarray | None) -> str:
    return "unknown at compile time" if value is None else str(np.asarray(value).tolist())


def _rewrite(r: Rewriter, m: Match) -> list[NewValue]:
    epsilon = _epsilon(r.graph, m)
    assert epsilon is not None  # checked
    return [r.op("SimplifiedLayerNormalization", m.x, m.scale, axis=-1, epsilon=epsilon)]


FUSE_RMS_NORM = Rule(
    "fuse_rms_norm",
    _pattern(),
    _rewrite,
    check=_check,
    targets="optimum (transformers RMSNorm): Mul(w, Cast(x * 1/Sqrt(ReduceMean(x^2) + eps))), q/k norms too",
)

DROP_IDENTITY_CAST = Rule(
    "drop_identity_cast",
    op.Cast(Var("x"), _where=_live_identity_cast),
    lambda r, m: [m.x],
    targets="optimum: RMSNorm's hidden_states.to(float32) in a float32 graph",
)

RMS_NORM_FUSIONS: tuple[Rule, ...] = (DROP_IDENTITY_CAST, FUSE_RMS_NORM)
