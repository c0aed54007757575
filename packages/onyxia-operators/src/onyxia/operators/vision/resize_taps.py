"""Per-axis tap tables for the Resize filters the affine shader path does not cover.

Cubic interpolation, antialiased downsampling and tf_crop_and_resize all read, for each output
coordinate of an axis, a fixed number of neighbouring input positions with weights that depend only
on that coordinate and the axis's scale. With static sizes those are compile-time facts, so they are
computed here once, as the ONNX reference and onnxruntime define them, and the shader only gathers
``sum_y w_y * sum_x w_x * x[iy, ix]``. A table is ``index`` (int32) and ``weight`` (float32), both
``[out, taps]``; an output whose first index is -1 takes `extrapolation_value` (tf_crop_and_resize).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onyxia.operators.vision.resize_nearest import nearest_round

__all__ = ["Filter", "Taps", "axis_taps"]


@dataclass(frozen=True)
class Filter:
    """How an axis interpolates: Resize's `mode` and the attributes that shape its kernel."""

    mode: str  # nearest | linear | cubic
    nearest_mode: str = "round_prefer_floor"
    cubic_coeff_a: float = -0.75
    antialias: bool = False
    exclude_outside: bool = False


@dataclass(frozen=True)
class Taps:
    index: np.ndarray  # int32 [out, taps], clamped into the axis; row [-1, ...] = extrapolate
    weight: np.ndarray  # float32 [out, taps]


def axis_taps(coords: np.ndarray, size: int, scale: float, f: Filter, outside: np.ndarray | None = None) -> Taps:
    """Taps of one axis from its float32 source coordinates (one per output position).

    `outside` flags outputs tf_crop_and_resize extrapolates. Kernels follow the reference: the taps
    start left of the coordinate (an integer coordinate counts as ratio 1 of the pixel before it),
    and neighbours past the edge repeat the edge unless `exclude_outside` drops and renormalizes them.
    """
    if f.mode == "nearest":
        index = np.clip(nearest_round(coords, f.nearest_mode), 0, size - 1)[:, None]
        weight = np.ones(index.shape, np.float64)
    else:
        base = np.ceil(coords).astype(np.int64) - 1
        ratio = coords.astype(np.float64) - base
        weight = _KERNELS[f.mode, f.antialias](ratio, min(scale, 1.0), f.cubic_coeff_a)
        taps = weight.shape[1]
        index = base[:, None] + (1 - taps // 2) + np.arange(taps)[None, :]
        if f.exclude_outside:
            weight = np.where((index < 0) | (index >= size), 0.0, weight)
            total = weight.sum(axis=1, keepdims=True)
            weight = weight / np.where(total == 0, 1.0, total)
        index = np.clip(index, 0, size - 1)
    if outside is not None:
        index[outside] = -1
    return Taps(index.astype(np.int32), weight.astype(np.float32))


def _linear(ratio: np.ndarray, scale: float, a: float) -> np.ndarray:
    return np.stack([1 - ratio, ratio], axis=1)


def _cubic(ratio: np.ndarray, scale: float, a: float) -> np.ndarray:
    """Keys' cubic convolution at distances 1 + r, r, 1 - r, 2 - r, in the reference's form."""
    r, s = ratio, 1 - ratio
    return np.stack(
        [
            ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a,
        ],
        axis=1,
    )


def _stretched(support: int, kernel: Callable[[np.ndarray, float], np.ndarray]) -> Callable[..., np.ndarray]:
    """Antialiasing: a downsampling axis widens the kernel by 1 / scale, normalized to sum 1."""

    def weights(ratio: np.ndarray, scale: float, a: float) -> np.ndarray:
        start = math.floor(-support / scale) + 1
        offsets = np.arange(start, 1 - start + 1)[None, :] - ratio[:, None]
        w = kernel(np.abs(offsets * scale), a)
        return w / w.sum(axis=1, keepdims=True)

    return weights


def _triangle(x: np.ndarray, a: float) -> np.ndarray:
    return np.clip(1 - x, 0, 1)


def _keys(x: np.ndarray, a: float) -> np.ndarray:
    near = (a + 2) * x**3 - (a + 3) * x**2 + 1
    far = a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


_KERNELS: dict[tuple[str, bool], Callable[[np.ndarray, float, float], np.ndarray]] = {
    ("linear", False): _linear,
    ("cubic", False): _cubic,
    ("linear", True): _stretched(1, _triangle),
    ("cubic", True): _stretched(2, _keys),
}
