"""The activation functions LSTM, GRU and RNN accept, as WGSL expressions of ``x``, and how the
``activations`` / ``activation_alpha`` / ``activation_beta`` attributes bind to them.

Alpha and beta are consumed in the order of the activation list, each function taking only what it
uses (Affine, ScaledTanh and HardSigmoid take both; LeakyRelu, ThresholdedRelu and Elu alpha). A
function past the end of the given values gets onnxruntime's default, which is 0 except for
LeakyRelu (0.01), HardSigmoid (0.2, 0.5) and Elu (1.0): onnxruntime is what models are checked
against, and ONNX's own op defaults (ThresholdedRelu's 1.0) do not apply here. Names compare
case-insensitively, as onnxruntime compares them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onyxia.core import DataType, NodeCtx
from onyxia.operators.layout import node_literal

__all__ = ["ACTIVATIONS", "Activation", "activation_expressions"]


@dataclass(frozen=True)
class Activation:
    """`expr` reads ``x``, ``ALPHA`` and ``BETA``; `alpha`/`beta` are the defaults (None: not taken)."""

    expr: str
    alpha: float | None = None
    beta: float | None = None


# tanh's argument is clamped: tanh(±10) is ±1 in f32, and some drivers' tanh returns NaN for |x| large
ACTIVATIONS: dict[str, Activation] = {
    "sigmoid": Activation("1.0 / (1.0 + exp(-x))"),
    "tanh": Activation("tanh(clamp(x, -10.0, 10.0))"),
    "relu": Activation("max(x, 0.0)"),
    "affine": Activation("ALPHA * x + BETA", 0.0, 0.0),
    "leakyrelu": Activation("select(ALPHA * x, x, x >= 0.0)", 0.01),
    "thresholdedrelu": Activation("select(0.0, x, x > ALPHA)", 0.0),  # onnxruntime: x > alpha, not >=
    "scaledtanh": Activation("ALPHA * tanh(clamp(BETA * x, -10.0, 10.0))", 0.0, 0.0),
    "hardsigmoid": Activation("clamp(ALPHA * x + BETA, 0.0, 1.0)", 0.2, 0.5),
    "elu": Activation("select(ALPHA * (exp(x) - 1.0), x, x >= 0.0)", 1.0),
    "softsign": Activation("x / (1.0 + abs(x))"),
    "softplus": Activation("log(1.0 + exp(x))"),
}


def activation_expressions(ctx: NodeCtx, defaults: Sequence[str], directions: int) -> list[list[str]]:
    """Per direction, the WGSL expression of each activation slot (f, g[, h]) of the cell."""
    names = ctx.attr("activations", None)
    names = [str(n) for n in names] if names is not None else list(defaults) * directions
    if len(names) != len(defaults) * directions:
        raise ctx.error(
            f"attribute activations has {len(names)} entries; expected {len(defaults) * directions} "
            f"({len(defaults)} per direction, for {directions} direction(s))"
        )
    alphas = list(ctx.attr("activation_alpha", None) or [])
    betas = list(ctx.attr("activation_beta", None) or [])
    exprs = [_expression(ctx, name, alphas, betas) for name in names]
    n = len(defaults)
    return [exprs[d * n : (d + 1) * n] for d in range(directions)]


def _expression(ctx: NodeCtx, name: str, alphas: list[float], betas: list[float]) -> str:
    row = ACTIVATIONS.get(name.lower())
    if row is None:
        raise ctx.error(f"attribute activations names '{name}'; expected one of {sorted(ACTIVATIONS)}")
    expr = row.expr
    for key, default, values in (("ALPHA", row.alpha, alphas), ("BETA", row.beta, betas)):
        if default is None:
            continue
        value = values.pop(0) if values else default
        expr = expr.replace(key, f"({node_literal(ctx, DataType.FLOAT, float(value), f'{name} {key.lower()}')})")
    return f"({expr})"
