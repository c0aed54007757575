"""Rules that re-view a conv's tensors: a column conv as a row conv, a depth-1 3-D conv as 2-D, activations moved.

The tiled conv kernel (conv_gemm.wgsl ROWS) takes 8 output pixels from one output row, so a conv over
``[N, C, H, 1]`` with a ``[KH, 1]`` kernel (jax2tf / Keras Conv1D exported as 2-D: magika's 5-tap conv over
512 bytes) fills 1 of every 8 pixel slots. ``[N, C, H, 1]`` and ``[N, C, 1, H]`` are the same bytes, so the
conv runs as ``Reshape -> Conv([1, KH]) -> Reshape`` on the transposed geometry (kernel, strides, dilations
and pads of H moved to W) with W's weights re-viewed: free views around a conv 8x better tiled. Likewise a
3-D conv of a depth-1 volume with a depth-1 kernel (rivagan's watermark encoder and decoder) is the 2-D conv
of its plane between a Squeeze and an Unsqueeze (views; the 2-D kernel skips the depth loop and its checks).

A conv output that only passes through a view (this rule's Reshape, conv_upsample.py's DepthToSpace) before
its activation would hide that activation from the epilogue fusion (conv_fusion.py); an elementwise
activation commutes with any view, so it moves in front of it.

Declines (reason logged, graph unchanged): weights not known at compile time, padding along W (depth), an
input whose W is not 1 or whose H is 1 (nothing to gain), a volume deeper than 1, auto_pad; an activation whose parameters are not scalar constants
or whose view does not read a conv.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode, TensorKind, TensorValue, shape_of
from onyxia.core.rewrite import Decline, Match, Rewriter, Rule, Var, op, sole_use
from onyxia.core.rewrite.patterns import Ops
from onyxia.core.rewrite.rewriter import NewValue
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.vision.conv_folds import bare_conv, initializer, known, pending_fold

__all__ = ["CONV_AXES"]

# activations that commute with views (elementwise, so applying them before or after is equal)
_MOVABLE = ("Relu", "Sigmoid", "HardSwish", "LeakyRelu", "Clip", "Tanh", "HardSigmoid")
_VIEWS = ("DepthToSpace", "Reshape")
_ROW_VIEW = [0, 0, 1, -1]  # [N, C, H, 1] -> [N, C, 1, H]
_COLUMN_VIEW = [0, 0, -1, 1]  # and back


def _shape(graph: IrGraph, name: str, dims: list[int]) -> int:
    array = np.asarray(dims, np.int64)
    value = TensorValue.from_numpy(array, name)
    return graph.add_tensor(
        name, DataType.INT64, shape_of([len(dims)]), TensorKind.INITIALIZER, value=array, initializer=value
    ).id


def _column_check(graph: IrGraph, m: Match) -> Decline | None:
    node = m.node
    x, w = graph.tensor(node.inputs[0]).dims, known(graph, node.inputs[1])
    if len(x) != 4 or x[3] != 1 or x[2] == 1:
        return Decline(f"the input {list(x)} is not a column [N, C, H > 1, 1]", node)
    a = node.attributes
    pads = list(a.get("pads", [0, 0, 0, 0]))
    if w is None or w.shape[3] != 1 or pads[1] or pads[3] or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return Decline("a [KH, 1] kernel known at compile time without W padding is needed", node)
    return _waits(graph, node)


def _waits(graph: IrGraph, node: IrNode) -> Decline | None:
    """A fold (conv_folds.py) or a residual Add reaches the conv only while it is not yet re-viewed."""
    y = node.outputs[0]
    if y is not None and (pending_fold(graph, y) or (node.domain != ONYXIA_DOMAIN and _residual_pending(graph, node))):
        return Decline("a fold or a residual Add reaches it first (then the new conv turns)", node)
    return None


def _residual_pending(graph: IrGraph, conv: IrNode) -> bool:
    """The conv's sole reader is an Add of a same-shaped float32 tensor, which conv_fusion.py takes as residual."""
    y = conv.outputs[0]
    reader = sole_use(graph, y) if y is not None else None
    if reader is None or reader.op_type != "Add" or reader.domain:
        return False
    other = [t for t in reader.inputs if t != y]
    dims, dtype = graph.tensor(y).dims, graph.tensor(y).dtype
    return (
        len(other) == 1
        and other[0] is not None
        and graph.tensor(other[0]).dims == dims
        and graph.tensor(other[0]).dtype == dtype
    )


def _column(r: Rewriter, m: Match) -> list[NewValue]:
    graph, node = r.graph, m.node
    w = known(graph, node.inputs[1])
    assert w is not None
    a = node.attributes
    pads = list(a.get("pads", [0, 0, 0, 0]))
    attrs = {
        **a,
        "kernel_shape": [1, int(w.shape[2])],
        "strides": [1, int(next(iter(a.get("strides", [1]))))],
        "dilations": [1, int(next(iter(a.get("dilations", [1]))))],
        "pads": [0, int(pads[0]), 0, int(pads[2])],
    }
    row = _shape(graph, f"{node.name}/row_view", _ROW_VIEW)
    x = r.op("Reshape", node.inputs[0], row)
    weights = initializer(graph, f"{node.name}/row_w", w.reshape(w.shape[0], w.shape[1], 1, w.shape[2]))
    rest = [r.op("Reshape", t, row) if i == 3 and t is not None else t for i, t in enumerate(node.inputs[2:], 2)]
    conv = r.op(node.op_type, x, weights, *rest, domain=node.domain, **attrs)
    return [r.op("Reshape", conv, _shape(graph, f"{node.name}/column_view", _COLUMN_VIEW), name=node.name)]


def _flat_check(graph: IrGraph, m: Match) -> Decline | None:
    node = m.node
    x, w = graph.tensor(node.inputs[0]).dims, known(graph, node.inputs[1])
    pads = list(node.attributes.get("pads", [0] * 6))
    if len(x) != 5 or x[2] != 1 or w is None or w.shape[2] != 1 or pads[0] or pads[3]:
        return Decline(f"not a depth-1 volume {list(x)} with a depth-1 kernel known at compile time", node)
    if node.attributes.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return Decline("auto_pad: the 2-D pads would differ", node)
    return _waits(graph, node)


def _flat(r: Rewriter, m: Match) -> list[NewValue]:
    """The 2-D conv of the depth-1 volume: Squeeze and Unsqueeze of axis 2 are views."""
    graph, node = r.graph, m.node
    w = known(graph, node.inputs[1])
    assert w is not None
    a = node.attributes
    pads = [int(p) for p in a.get("pads", [0] * 6)]
    attrs = {
        **a,
        "kernel_shape": [int(k) for k in w.shape[3:]],
        "strides": [int(v) for v in list(a.get("strides", [1, 1, 1]))[1:]],
        "dilations": [int(v) for v in list(a.get("dilations", [1, 1, 1]))[1:]],
        "pads": pads[1:3] + pads[4:6],
    }
    weights = initializer(graph, f"{node.name}/plane_w", w[:, :, 0])
    rest = [_depth_view(r, "Squeeze", t) if i == 3 and t is not None else t for i, t in enumerate(node.inputs[2:], 2)]
    conv = r.op(node.op_type, _depth_view(r, "Squeeze", node.inputs[0]), weights, *rest, domain=node.domain, **attrs)
    return [_depth_view(r, "Unsqueeze", conv, node.name)]


def _depth_view(r: Rewriter, op_type: str, t: int | NewValue | None, name: str | None = None) -> NewValue:
    """Squeeze or Unsqueeze of axis 2, spelled for the graph's opset (axes an input from opset 13 on)."""
    if r.graph.opset_imports.get("", 0) >= 13:
        return r.op(op_type, t, _shape(r.graph, f"{name or op_type}/depth_axis", [2]), name=name)
    return r.op(op_type, t, axes=[2], name=name)


def _move_check(graph: IrGraph, m: Match) -> Decline | None:
    extra = [known(graph, t) for t in m.node.inputs[1:] if t is not None]
    if any(value is None or value.size != 1 for value in extra):
        return Decline("the activation's parameters are not scalar constants", m.node)
    if bare_conv(graph, m.y) is None:
        return Decline(f"the {m.view.op_type}'s input is not a conv's: nothing would fuse", m.node)
    return None


def _move(r: Rewriter, m: Match) -> list[NewValue]:
    view: IrNode = m.view
    act = r.op(m.node.op_type, m.y, *m.node.inputs[1:], **m.node.attributes)
    return [r.op(view.op_type, act, *view.inputs[1:], **view.attributes)]


def _conv_rules(
    name: str,
    rewrite: Callable[[Rewriter, Match], list[NewValue]],
    check: Callable[[IrGraph, Match], Decline | None],
    targets: str,
) -> tuple[Rule, ...]:
    """The rule for Conv and for com.onyxia FusedConv (whose residual, input 3, is re-viewed alike)."""
    return tuple(
        Rule(
            f"{op_type}_{name}", getattr(ops, op_type)(Var("x"), Var("w"), _extra_inputs=True), rewrite, check, targets
        )
        for ops, op_type in ((op, "Conv"), (Ops(ONYXIA_DOMAIN), "FusedConv"))
    )


CONV_AXES: tuple[Rule, ...] = (
    *_conv_rules("column_as_row", _column, _column_check, "magika (jax2tf Conv1D as [N, C, L, 1], a [5, 1] kernel)"),
    *_conv_rules("depth_1_as_2d", _flat, _flat_check, "rivagan's [N, C, 1, H, W] convs with [1, 11, 11] kernels"),
    *(
        Rule(
            f"move_{act}_before_view",
            getattr(op, act)(op.any_of(_VIEWS, Var("y"), _name="view", _extra_inputs=True), _extra_inputs=True),
            _move,
            check=_move_check,
            targets="PP-OCR det: Relu / Sigmoid after an upsampling ConvTranspose; column convs' activations",
        )
        for act in _MOVABLE
    ),
)
