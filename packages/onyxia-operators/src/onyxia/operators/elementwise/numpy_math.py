"""numpy folds for the rows whose math numpy lacks (erf, gelu, sigmoid, the activations), in float64 then cast back."""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "celu",
    "elu",
    "erf",
    "gelu",
    "is_inf",
    "mish",
    "selu",
    "shrink",
    "sigmoid",
    "softplus",
    "softsign",
    "thresholded_relu",
]

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    return _erf(x.astype(np.float64)).astype(x.dtype)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x.astype(np.float64)).astype(x.dtype)


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    v = x.astype(np.float64)
    if approximate == "tanh":
        return (0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))).astype(x.dtype)
    return (0.5 * v * (1.0 + _erf(v / math.sqrt(2.0)))).astype(x.dtype)


# ----- the inverse-trig, hyperbolic and activation rows: float64, then the input's dtype ---------
def _f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def mish(x: np.ndarray) -> np.ndarray:
    v = _f64(x)
    return (v * np.tanh(np.logaddexp(0.0, v))).astype(x.dtype)


def elu(x: np.ndarray, alpha: float) -> np.ndarray:
    v = _f64(x)
    return np.where(v >= 0, v, alpha * np.expm1(np.minimum(v, 0))).astype(x.dtype)


def celu(x: np.ndarray, alpha: float) -> np.ndarray:
    v = _f64(x)
    return np.where(v > 0, v, np.minimum(0.0, alpha * np.expm1(np.minimum(v, 0) / alpha))).astype(x.dtype)


def selu(x: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    v = _f64(x)
    return (gamma * np.where(v > 0, v, alpha * np.exp(np.minimum(v, 0)) - alpha)).astype(x.dtype)


def thresholded_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > np.float32(alpha), x, 0).astype(x.dtype)


def softsign(x: np.ndarray) -> np.ndarray:
    v = _f64(x)
    return (v / (1.0 + np.abs(v))).astype(x.dtype)


def shrink(x: np.ndarray, lambd: float, bias: float) -> np.ndarray:
    # onnxruntime compares and adds in float32, then converts (integers truncate toward zero)
    v = x.astype(np.float32)
    lambd32, bias32 = np.float32(lambd), np.float32(bias)
    y = np.where(v < -lambd32, v + bias32, np.where(v > lambd32, v - bias32, np.float32(0)))
    return np.trunc(y).astype(x.dtype) if np.issubdtype(x.dtype, np.integer) else y.astype(x.dtype)


def is_inf(x: np.ndarray, detect_positive: bool, detect_negative: bool) -> np.ndarray:
    return np.isinf(x) & np.where(x > 0, detect_positive, detect_negative)
