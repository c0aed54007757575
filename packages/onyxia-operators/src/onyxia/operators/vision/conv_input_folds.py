"""Rules for what comes between two convs: an affine map on an unpadded conv's input, and HardSwish spelled out.

PP-LCNetV3 (PP-OCRv4's det and rec backbones) ends each conv block with a learnable affine block after the
activation, ``Mul(a, s) -> Add(., t)``, then the next conv. When that conv reads no padding (a 1 x 1 pointwise
conv, or any conv with zero pads) every tap is an input value, so ``conv(s * x + t) = conv'(x)`` with
``W'[m, c] = W[m, c] * s[c]`` and ``B'[m] = B[m] + sum over (c, taps) of W[m, c] * t[c]``: the affine pass goes.
(A padded conv would read the padding's zeros where the affine map gives ``t``, so those keep it.)

Paddle2onnx also writes HardSwish as ``x * Clip(x + 3, 0, 6) / 6``; after a conv that becomes ``HardSwish(x)``
so conv_fusion.py takes it into the conv epilogue (the formulas differ by rounding only: ``x * clamp(x / 6 +
0.5, 0, 1)``, as onnxruntime's HardSwish computes it).

Declines (reason logged, graph unchanged): a conv with pads, weights or bias not known at compile time, an
affine map whose result something else also reads or that broadcasts its input, an idiom whose constants are
not 3, 0, 6 and 6, or whose input is not a conv's output.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onyxia.core import DataType, IrGraph, IrNode
from onyxia.core.rewrite import Const, Decline, Match, Rewriter, Rule, Var, op, sole_use
from onyxia.core.rewrite.matching import match_pattern
from onyxia.core.rewrite.patterns import Ops
from onyxia.core.rewrite.rewriter import NewValue
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.vision.conv_folds import bare_conv, channel_op, initializer, known

__all__ = ["CONV_INPUT_FOLDS"]

_MAX_CHAIN = 4  # affine ops walked back from a conv's input
_X = Var("x")
_GATED = op.Mul(_X, op.Clip(op.Add(_X, Const("three"), _commute=True), Const("lo"), Const("hi")), _commute=True)
_EXPECTED = {"three": 3.0, "lo": 0.0, "hi": 6.0}
_IDIOMS = (op.Div(_GATED, Const("k")), op.Mul(_GATED, Const("k"), _commute=True))  # HardSwish's last op


def _unpadded(node: IrNode) -> bool:
    a = node.attributes
    return not any(a.get("pads", [0])) and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID")


def _same_dims(graph: IrGraph, t: int) -> Callable[[int], bool]:
    """Accepts an operand of `t`'s dims: dropping the op then leaves the conv's input shape as it was."""
    dims = graph.tensor(t).dims
    return lambda y: graph.tensor(y).dims == dims


def _input_affine(graph: IrGraph, conv: IrNode) -> tuple[int, np.ndarray, np.ndarray] | None:
    """(x, scale, shift) per input channel: the conv's input is ``x * scale + shift`` through a chain of
    per-channel constant ops each read only by the next, or None when there is no such op."""
    t, scale, shift, steps = conv.inputs[0], None, None, 0
    while t is not None and steps < _MAX_CHAIN:
        node = graph.tensor_producer(t)
        reader = sole_use(graph, t)
        if node is None or reader is None or any(match_pattern(graph, idiom, node) for idiom in _IDIOMS):
            break  # the HardSwish idiom's "/ 6" stays with it, for the previous conv's epilogue
        found = channel_op(graph, node, _same_dims(graph, t))
        if found is None or graph.tensor(t).dtype != DataType.FLOAT:
            break
        x, p, q = found  # t = x * p + q, and the conv's input = t * scale + shift
        scale, shift = (p, q) if scale is None or shift is None else (p * scale, q * scale + shift)
        t, steps = x, steps + 1
    return None if t is None or scale is None or shift is None else (t, scale, shift)


def _check(graph: IrGraph, m: Match) -> Decline | None:
    conv = m.node
    bias = conv.inputs[2] if len(conv.inputs) > 2 else None
    if not _unpadded(conv) or known(graph, conv.inputs[1]) is None or (bias is not None and known(graph, bias) is None):
        return Decline("the conv reads padding, or its weights or bias are not constants", conv)
    if _input_affine(graph, conv) is None:
        return Decline("its input is not a per-channel affine map read only by it", conv)
    return None


def _fold(r: Rewriter, m: Match) -> list[NewValue]:
    graph, conv = r.graph, m.node
    found, w = _input_affine(graph, conv), known(graph, conv.inputs[1])
    assert found is not None and w is not None
    x, scale, shift = found
    bias_in = conv.inputs[2] if len(conv.inputs) > 2 else None
    bias = known(graph, bias_in) if bias_in is not None else np.zeros(w.shape[0])
    assert bias is not None
    mg, cg = w.shape[0] // int(conv.attributes.get("group", 1)), w.shape[1]
    channel = (np.arange(w.shape[0]).reshape(-1, 1) // mg) * cg + np.arange(cg)  # W[m, c]'s input channel
    w64 = w.astype(np.float64)
    taps = (1,) * (w.ndim - 2)
    w2 = w64 * scale[channel].reshape(channel.shape + taps)
    b2 = bias.astype(np.float64) + (w64 * shift[channel].reshape(channel.shape + taps)).reshape(w.shape[0], -1).sum(1)
    folded = (initializer(graph, f"{conv.name}/input_w", w2), initializer(graph, f"{conv.name}/input_b", b2))
    return [r.op(conv.op_type, x, *folded, *conv.inputs[3:], domain=conv.domain, **conv.attributes)]


# ----- x * Clip(x + 3, 0, 6) / 6 -> HardSwish(x) --------------------------------------------------


def _hardswish_check(graph: IrGraph, m: Match) -> Decline | None:
    values = {name: known(graph, getattr(m, name)) for name in (*_EXPECTED, "k")}
    expected = {**_EXPECTED, "k": 6.0 if m.node.op_type == "Div" else 1.0 / 6.0}
    if any(v is None or v.size != 1 or not np.isclose(float(v.reshape(-1)[0]), expected[k]) for k, v in values.items()):
        return Decline("the constants are not HardSwish's 3, 0, 6 and 6", m.node)
    if bare_conv(graph, m.x) is None or graph.tensor(m.x).dtype != DataType.FLOAT:
        return Decline("the input is not a float32 conv's output: no epilogue would take it", m.node)
    return None


def _hardswish(r: Rewriter, m: Match) -> list[NewValue]:
    return [r.op("HardSwish", m.x)]


def _conv_rule(ops: Ops, op_type: str) -> Rule:
    return Rule(
        f"fold_input_affine_into_{op_type}",
        getattr(ops, op_type)(Var("x"), Var("w"), _extra_inputs=True),
        _fold,
        check=_check,
        targets="PP-LCNetV3 (PP-OCRv4): affine block -> 1 x 1 conv",
    )


CONV_INPUT_FOLDS: tuple[Rule, ...] = (
    _conv_rule(op, "Conv"),
    _conv_rule(Ops(ONYXIA_DOMAIN), "FusedConv"),
    *(
        Rule(
            f"HardSwish_idiom_{sorted(i.op_types)[0]}",
            i,
            _hardswish,
            check=_hardswish_check,
            targets="paddle2onnx: x * Clip(x + 3, 0, 6) / 6",
        )
        for i in _IDIOMS
    ),
)
