"""Nearest Resize's input index for each output coordinate, as onnxruntime's CPU kernel picks it, on any adapter.

onnxruntime maps an output coordinate to a float32 source coordinate (`GetOriginalCoordinate`: half_pixel's
``(x + 0.5f) / scale - 0.5f`` ...) and rounds that by `nearest_mode`. At an exact tie only the mode decides (2 -> 7
rows, half_pixel: row 3 maps to 0.5, and round_prefer_floor takes 0), so the coordinate must come out exactly as
onnxruntime's does. A shader evaluating the float map cannot promise it: WGSL allows `/` an error of 2.5 ULP and lets
a compiler turn a division into a product with a reciprocal and contract it with the next add; NVIDIA's driver (an
H200) read row 1 there. So each axis's indices are settled without float arithmetic on the device:

- a static axis gets a table, computed here in numpy's float32 (float64 where onnxruntime computes in double) in
  onnxruntime's order of operations;
- an axis whose map is floor or ceil of ``(A x + B) / C`` with small integers takes that, in exact i32 arithmetic:
  symbolic axes (unresized, integer scales, one over a power of two: `resize_target._symbolic_scaled`, where the
  float map and the rational one round alike below 2^22), and a static axis whose table the rational reproduces
  (2x upsampling), so the common resizes read no table.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from onyxia.core import SymbolicDim

__all__ = ["NearestAxis", "nearest_axis", "nearest_round", "ort_coordinates"]

_RATIONAL_TERMS = 1 << 10  # largest numerator or denominator of a scale taken as a rational map
_I32 = 1 << 31


@dataclass(frozen=True)
class NearestAxis:
    """One axis's indices: `table` (int32, one per output coordinate, clamped) or `rational`, the
    ``(A, B, C, ceil)`` of ``floor_or_ceil((A x + B) / C)`` with C > 0 (the shader clamps it into the axis)."""

    table: np.ndarray | None = None
    rational: tuple[int, int, int, bool] | None = None

    def indices(self, size_in: int, size_out: int) -> np.ndarray:
        """The input index of each output coordinate, as the shader finds it (`rational_index` in resize.wgsl)."""
        if self.table is not None:
            return self.table.astype(np.int64)
        a, b, c, up = self.rational or (1, 0, 1, False)
        n = a * np.arange(size_out, dtype=np.int64) + b
        return np.clip(-(-n // c) if up else n // c, 0, size_in - 1)


def ort_coordinates(transform: str, scale: float, size_in: int, size_out: int) -> np.ndarray:
    """onnxruntime's source coordinate (float32) of each output coordinate of an axis."""
    x = np.arange(size_out, dtype=np.float32)
    s, half = np.float32(scale), np.float32(0.5)
    if transform == "asymmetric":
        return x / s
    if transform == "align_corners":
        if size_out == 1:
            return np.zeros(1, np.float32)
        return x * np.float32(size_in - 1) / np.float32(size_out - 1)
    if transform == "half_pixel_symmetric":  # onnxruntime: these steps in float, then the sum in double
        adjustment = np.float32(size_out) / (s * np.float32(size_in))
        offset = np.float32(size_in) / np.float32(2) * (np.float32(1) - adjustment)
        return (np.float64(offset) + (x.astype(np.float64) + 0.5) / np.float64(s) - 0.5).astype(np.float32)
    if transform == "pytorch_half_pixel" and size_out == 1:
        return np.zeros(1, np.float32)
    return (x + half) / s - half  # half_pixel, pytorch_half_pixel


def nearest_round(coords: np.ndarray, nearest_mode: str) -> np.ndarray:
    """onnxruntime's `GetNearestPixelFromOriginal` of float32 `coords` (int64), computed in float64, where each
    step is exact (``c + 0.5`` in float32 rounds 0.49999997 up to 1)."""
    c = coords.astype(np.float64)
    away = np.sign(c) * np.floor(np.abs(c) + 0.5)  # std::round: halves away from zero
    if nearest_mode == "round_prefer_floor":
        rounded = np.where(c == np.trunc(c) + 0.5, np.floor(c), away)
    elif nearest_mode == "round_prefer_ceil":
        rounded = away
    elif nearest_mode == "floor":
        rounded = np.floor(c)
    else:
        rounded = np.ceil(c)
    return rounded.astype(np.int64)


def nearest_axis(
    transform: str, nearest_mode: str, scale: float, size_in: SymbolicDim, size_out: SymbolicDim
) -> NearestAxis | None:
    """How the shader finds an axis's input index; None for a symbolic axis without a rational map."""
    rational = _rational(transform, nearest_mode, scale, size_out)
    if not isinstance(size_in, int) or not isinstance(size_out, int):
        return None if rational is None else NearestAxis(rational=rational)
    if size_in == 1:  # rank 3's H, or a broadcast axis: every index clamps to 0
        return NearestAxis(rational=(0, 0, 1, False))
    table = np.clip(nearest_round(ort_coordinates(transform, scale, size_in, size_out), nearest_mode), 0, size_in - 1)
    if rational is not None and _fits(rational, size_out):
        candidate = NearestAxis(rational=rational)
        if np.array_equal(candidate.indices(size_in, size_out), table):
            return candidate
    return NearestAxis(table=table.astype(np.int32))


def _rational(
    transform: str, nearest_mode: str, scale: float, size_out: SymbolicDim
) -> tuple[int, int, int, bool] | None:
    """floor_or_ceil((A x + B) / C) equal to rounding the exact map, for half_pixel and asymmetric with a scale
    N / D of small terms; onnxruntime's float map rounds alike wherever its rounding error stays below the
    rational's distance to a rounding boundary (1 / 2C), which the static axes check entry by entry."""
    if transform == "pytorch_half_pixel" and size_out != 1 and isinstance(size_out, int):
        transform = "half_pixel"
    if transform not in ("half_pixel", "asymmetric") or not scale > 0:
        return None
    ratio = Fraction(scale)  # exact: the float32 scale onnxruntime divides by
    n, d = ratio.numerator, ratio.denominator
    if n > _RATIONAL_TERMS or d > _RATIONAL_TERMS:
        return None
    # half_pixel: (x + 1/2) D / N - 1/2 = (2 D x + D - N) / 2N; asymmetric: D x / N
    a, b, c = (2 * d, d - n, 2 * n) if transform == "half_pixel" else (d, 0, n)
    if nearest_mode == "round_prefer_floor":  # ceil(c - 1/2): a tie goes down
        return 2 * a, 2 * b - c, 2 * c, True
    if nearest_mode == "round_prefer_ceil":  # floor(c + 1/2): a tie goes up
        return 2 * a, 2 * b + c, 2 * c, False
    return a, b, c, nearest_mode == "ceil"


def _fits(rational: tuple[int, int, int, bool], size_out: int) -> bool:
    """Whether every A x + B of the axis (and C) stays inside i32."""
    a, b, c, _ = rational
    return max(abs(b), abs(a * (size_out - 1) + b), c) < _I32
