"""numpy folds for the rows whose math numpy lacks (erf, gelu, sigmoid), in float64 then cast back."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["erf", "gelu", "sigmoid", "softplus"]

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
