"""Rules that fold what follows a Conv into its epilogue: com.onyxia ``FusedConv``.

``act(Conv(x, W, B))`` becomes ``FusedConv(x, W, B, activation=...)`` for the activations vision models put
after their convs: Relu (ResNet, VGG), ``Mul(y, Sigmoid(y))`` (SiLU: YOLOv5/v8, EfficientNet), Sigmoid,
HardSwish (MobileNetV3), LeakyRelu (YOLOv3/v4, Darknet) and Clip (ReLU6: MobileNetV2). Then ``Add(FusedConv,
r)`` or ``Add(Conv, r)`` (either order; r of the output's shape) takes r as the residual, added after the
activation: YOLOv8's C2f bottlenecks (``x + SiLU(conv)``) and MobileNet's inverted residuals (``x + conv``).
Each fused op is one kernel pass over the output instead of two or three.

Declines (reason logged, graph unchanged): a conv that is not float32 (the fused kernel skips the f16 stores the
unfused graph rounds through), a conv output something else also reads, a Clip whose bounds are not constants,
a residual of another shape (a broadcast), a FusedConv that already has one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode
from onyxia.core.rewrite import Attr, Decline, Match, Ops, Rewriter, Rule, Var, op, producer, sole_use
from onyxia.core.rewrite.rewriter import NewValue
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.vision.conv_axes import CONV_AXES
from onyxia.operators.vision.conv_folds import CONV_FOLDS
from onyxia.operators.vision.conv_input_folds import CONV_INPUT_FOLDS
from onyxia.operators.vision.conv_upsample import CONV_UPSAMPLE

__all__ = ["CONV_FUSIONS", "FUSED_ACTIVATIONS"]

# FusedConv's `activation` values (conv_epilogue.wgsl's ACTIVATION)
FUSED_ACTIVATIONS = ("none", "relu", "silu", "sigmoid", "hardswish", "leaky_relu", "clip")
_FUSED = Ops(ONYXIA_DOMAIN)


def _conv_of(graph: IrGraph, m: Match, readers: int = 1) -> Decline | None:
    """The activation's input comes from a float32 Conv (or an activation-free FusedConv) read by nothing but
    the `readers` nodes of the match."""
    conv = producer(graph, m.y, ("Conv",)) or producer(graph, m.y, ("FusedConv",), ONYXIA_DOMAIN)
    if conv is None:
        return Decline("the input is not a Conv's output", m.node)
    if conv.domain == ONYXIA_DOMAIN and (conv.attributes.get("activation", "none") != "none" or len(conv.inputs) > 3):
        return Decline("the FusedConv already has an epilogue", conv)
    if graph.tensor(m.y).dtype != DataType.FLOAT:
        return Decline(f"'{conv.name}' is {graph.tensor(m.y).dtype.name.lower()}; only float32 convs fuse", conv)
    uses = graph.tensor_consumers(m.y)
    members = {n.id for n in m.nodes}
    if len(uses) != readers or any(n.id not in members for n, _ in uses) or graph.is_graph_output(m.y):
        return Decline(f"'{conv.name}''s output has other uses", conv)
    return None


def _fused(r: Rewriter, m: Match, **attrs: Any) -> list[NewValue]:
    conv = producer(r.graph, m.y, ("Conv",)) or producer(r.graph, m.y, ("FusedConv",), ONYXIA_DOMAIN)
    assert conv is not None  # the check found it
    inputs = list(conv.inputs) + [None] * (3 - len(conv.inputs))
    return [r.op("FusedConv", *inputs, domain=ONYXIA_DOMAIN, **{**conv.attributes, **attrs})]


def _activation(
    name: str, pattern: Any, attrs: Callable[[IrGraph, Match], dict[str, Any] | None], readers: int = 1
) -> Rule:
    def check(graph: IrGraph, m: Match) -> Decline | None:
        if attrs(graph, m) is None:
            return Decline("the activation's parameters are not constants", m.node)
        return _conv_of(graph, m, readers)

    return Rule(
        f"fuse_{name}_into_Conv",
        pattern,
        lambda r, m: _fused(r, m, **(attrs(r.graph, m) or {})),
        check=check,
        targets="YOLOv8 / MobileNet / ResNet conv activations",
    )


def _clip_bounds(graph: IrGraph, m: Match) -> dict[str, Any] | None:
    bounds = {"lo": float(np.finfo(np.float32).min), "hi": float(np.finfo(np.float32).max)}
    for key, tensor in (("lo", m.lo), ("hi", m.hi)):
        if tensor is None:
            continue
        value = graph.tensor(tensor).value
        if value is None or not isinstance(value, np.ndarray) or value.size != 1:
            return None
        bounds[key] = float(value.reshape(-1)[0])
    return {"activation": "clip", **bounds}


_Y = Var("y")
CONV_FUSIONS: tuple[Rule, ...] = (
    _activation("Relu", op.Relu(_Y), lambda g, m: {"activation": "relu"}),
    _activation(
        "SiLU",
        op.Mul(_Y, op.Sigmoid(_Y, _name="sigmoid"), _commute=True),
        lambda g, m: {"activation": "silu"},
        readers=2,
    ),
    _activation("Sigmoid", op.Sigmoid(_Y), lambda g, m: {"activation": "sigmoid"}),
    _activation("HardSwish", op.HardSwish(_Y), lambda g, m: {"activation": "hardswish"}),
    _activation(
        "LeakyRelu",
        op.LeakyRelu(_Y, alpha=Attr("alpha", 0.01)),
        lambda g, m: {"activation": "leaky_relu", "alpha": float(m.alpha)},
    ),
    _activation("Clip", op.Clip(_Y, Var("lo"), Var("hi")), _clip_bounds),
)


def _conv_operand(graph: IrGraph, m: Match) -> tuple[IrNode, int, int] | None:
    """(conv, its output, the other operand) of the Add: the first operand a Conv or FusedConv produces."""
    for y, other in ((m.a, m.b), (m.b, m.a)):
        conv = producer(graph, y, ("Conv",)) or producer(graph, y, ("FusedConv",), ONYXIA_DOMAIN)
        if conv is not None and len(conv.inputs) <= 3:
            return conv, y, other
    return None


def _residual_check(graph: IrGraph, m: Match) -> Decline | None:
    found = _conv_operand(graph, m)
    if found is None:
        return Decline("neither operand is the output of a Conv without a residual", m.node)
    conv, y_id, r_id = found
    y, res = graph.tensor(y_id), graph.tensor(r_id)
    if y.dtype != DataType.FLOAT or list(res.dims) != list(y.dims) or res.dtype != y.dtype:
        return Decline(f"residual '{res.name}' {list(res.dims)} is not the conv's float32 {list(y.dims)}", m.node)
    if sole_use(graph, y_id) is None:
        return Decline(f"'{conv.name}''s output has other uses", conv)
    return None


def _with_residual(r: Rewriter, m: Match) -> list[NewValue]:
    found = _conv_operand(r.graph, m)
    assert found is not None  # the check found it
    conv, _, residual = found
    inputs = list(conv.inputs) + [None] * (3 - len(conv.inputs))
    attrs = {"activation": "none", **conv.attributes}
    return [r.op("FusedConv", *inputs, residual, domain=ONYXIA_DOMAIN, **attrs)]


FUSE_RESIDUAL = Rule(
    "fuse_add_into_Conv",
    op.Add(Var("a"), Var("b")),
    _with_residual,
    check=_residual_check,
    targets="YOLOv8 C2f bottleneck x + SiLU(conv), MobileNet inverted residual x + conv",
)
# the folds first: a BatchNormalization or bias Add between a conv and its activation hides the activation
CONV_FUSIONS = (*CONV_FOLDS, *CONV_UPSAMPLE, *CONV_AXES, *CONV_INPUT_FOLDS, *CONV_FUSIONS, FUSE_RESIDUAL)
