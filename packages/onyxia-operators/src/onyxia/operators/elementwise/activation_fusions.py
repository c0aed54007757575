"""Rewrite rules that name an activation an exporter spelled out in plain ops, so the gated-MLP rules see it.

- ``gelu_tanh_formula``: ``0.5 * x * (1 + Tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`` becomes
  ``Gelu(x, approximate="tanh")``. optimum's Gemma 2 and Gemma 3 exports (transformers' ``gelu_pytorch_tanh``
  below opset 20) write it as nine Muls, Adds and a Tanh; as one named Gelu the gate/up group and the
  activation become one GatedMatMul (`FuseMlpGate`), as in the onnx-community and genai Gemma graphs. The
  cube is ``x * (x * x)`` or ``Pow(x, 3)``, every product and sum in either operand order. The kernel
  evaluates the same formula in float32 (``onyxia::math`` ``gelu_tanh``), so results differ from the
  graph's only by the order of the roundings (a few ULP). Declines when a constant is not the formula's
  (to float32 precision) or the operands are not float32.
"""

from __future__ import annotations

import math

import numpy as np

from onyxia.core import DataType, IrGraph
from onyxia.core.rewrite import AnyOf, Const, Decline, Match, NewValue, OpPattern, Rewriter, Rule, Var, op

__all__ = ["ACTIVATION_FUSIONS", "GELU_TANH_FORMULA"]

_CONSTANTS = {"half": 0.5, "one": 1.0, "cubic": 0.044715, "root": math.sqrt(2.0 / math.pi), "three": 3.0}


def _gelu_tanh_patterns() -> tuple[OpPattern, OpPattern]:
    """``(x * (1 + t)) * 0.5`` and ``(x * 0.5) * (1 + t)``: the two ways the halving is placed."""
    x = Var("x")
    cube = AnyOf(
        op.Mul(x, op.Mul(x, x), _commute=True),
        op.Pow(x, Const("three")),
    )
    inner = op.Add(x, op.Mul(cube, Const("cubic"), _commute=True), _commute=True)
    tanh = op.Tanh(op.Mul(inner, Const("root"), _commute=True))
    one_plus = op.Add(tanh, Const("one"), _commute=True)
    return (
        op.Mul(op.Mul(x, one_plus, _commute=True), Const("half"), _commute=True),
        op.Mul(op.Mul(x, Const("half"), _commute=True), one_plus, _commute=True),
    )


def _value(graph: IrGraph, t: int) -> float | None:
    tensor = graph.tensor(t)
    value = tensor.value if tensor.value is not None else tensor.initializer.numpy() if tensor.initializer else None
    if value is None or tensor.dtype != DataType.FLOAT or np.size(value) != 1:
        return None
    return float(np.asarray(value, dtype=np.float32).reshape(()))


def _check(graph: IrGraph, m: Match) -> Decline | None:
    if graph.tensor(m.x).dtype != DataType.FLOAT:
        return Decline(f"x is {graph.tensor(m.x).dtype.short}; the rule matches float32 graphs", m.node)
    for name, expected in _CONSTANTS.items():
        t = getattr(m, name, None)
        if t is None:
            continue
        got = _value(graph, t)
        if got is None or got != float(np.float32(expected)):
            return Decline(f"the constant '{name}' is {got}, not the tanh-Gelu's {np.float32(expected)}", m.node)
    return None


def _gelu(r: Rewriter, m: Match) -> list[NewValue]:
    return [r.op("Gelu", m.x, approximate="tanh")]


GELU_TANH_FORMULA = tuple(
    Rule(
        f"gelu_tanh_formula{suffix}",
        pattern,
        _gelu,
        check=_check,
        targets="optimum Gemma 2/3: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) as nine plain ops",
    )
    for suffix, pattern in zip(("", "_halved_first"), _gelu_tanh_patterns())
)

ACTIVATION_FUSIONS = GELU_TANH_FORMULA
