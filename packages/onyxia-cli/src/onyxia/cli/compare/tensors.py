"""One tensor of onnxruntime's against Onyxia's: the tolerance rule, the statistics a report shows.

Floating tensors pass when, element by element,
``|onyxia - ort| <= rtol * |ort| + atol * max(1, max|ort|)``: the relative term covers each element,
the absolute term scales with the tensor's largest magnitude, because reductions (matmul, conv,
softmax, norms) sum in another order than onnxruntime's CPU kernels and their error grows with the
output, not with each element (the packaged-model suite measured at most 4.5e-7 of the largest
magnitude on lavapipe; tests/real_model_suite.py). The floor of 1 keeps a tensor of near-zero values
from demanding exact equality. A half-precision tensor never gets tighter bounds than its type's
epsilon: one rounding step apart is not a bug. NaN matches NaN at the same place, an infinity matches
the same infinity, and nothing else matches either. Integer and bool tensors must be equal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Stats", "TensorDiff", "Tolerance", "compare_tensors", "describe"]


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float

    def for_dtype(self, dtype: np.dtype) -> tuple[float, float]:
        """(atol, rtol) for a floating `dtype`: never below its machine epsilon."""
        eps = float(np.finfo(dtype).eps) if np.issubdtype(dtype, np.floating) else 0.0
        return max(self.atol, eps), max(self.rtol, eps)


@dataclass(frozen=True)
class Stats:
    """What one side's tensor looks like; min/max/mean/std over its finite elements."""

    dtype: str
    shape: tuple[int, ...]
    minimum: float | None
    maximum: float | None
    mean: float | None
    std: float | None
    nans: int
    infs: int


@dataclass(frozen=True)
class TensorDiff:
    """onnxruntime's tensor (`reference`) against Onyxia's (`actual`); `ok` says whether it is within tolerance."""

    reference: Stats
    actual: Stats
    ok: bool
    exact: bool  # integer/bool: compared for equality
    mismatched: int  # elements outside tolerance (all of them when the shapes differ)
    total: int
    max_abs: float
    max_rel: float
    worst_index: tuple[int, ...] | None  # where |onyxia - ort| is largest among the mismatches
    worst_values: tuple[float, float] | None  # (ort, onyxia) there
    note: str = ""  # why the tensors could not be compared element by element


def describe(array: np.ndarray) -> Stats:
    a = np.asarray(array)
    values = a.astype(np.float64) if a.dtype != np.float64 else a
    finite = values[np.isfinite(values)] if values.size else values
    stats: tuple[float | None, ...] = (None, None, None, None)
    if finite.size:
        stats = (float(finite.min()), float(finite.max()), float(finite.mean()), float(finite.std()))
    nans = int(np.isnan(values).sum()) if a.dtype.kind in "fc" else 0
    infs = int(np.isinf(values).sum()) if a.dtype.kind in "fc" else 0
    low, high, mean, std = stats
    return Stats(str(a.dtype), tuple(int(d) for d in a.shape), low, high, mean, std, nans, infs)


def compare_tensors(reference: np.ndarray, actual: np.ndarray, tolerance: Tolerance) -> TensorDiff:
    ref, got = np.asarray(reference), np.asarray(actual)
    ref_stats, got_stats = describe(ref), describe(got)
    exact = not (np.issubdtype(ref.dtype, np.floating) and np.issubdtype(got.dtype, np.floating))
    if ref.shape != got.shape:
        note = f"shapes differ: onnxruntime {list(ref.shape)}, Onyxia {list(got.shape)}"
        return TensorDiff(ref_stats, got_stats, False, exact, ref.size, ref.size, np.inf, np.inf, None, None, note)
    if exact and ref.dtype.kind != got.dtype.kind and {ref.dtype.kind, got.dtype.kind} & {"f", "c"}:
        note = f"dtypes differ: onnxruntime {ref.dtype}, Onyxia {got.dtype}"
        return TensorDiff(ref_stats, got_stats, False, exact, ref.size, ref.size, np.inf, np.inf, None, None, note)
    r, g = ref.astype(np.float64), got.astype(np.float64)
    if exact:
        bad = ref != got if ref.dtype == got.dtype else r != g
    else:
        atol, rtol = tolerance.for_dtype(ref.dtype)
        scale = float(np.abs(r[np.isfinite(r)]).max()) if np.isfinite(r).any() else 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            within = np.isfinite(r) & np.isfinite(g) & (np.abs(g - r) <= rtol * np.abs(r) + atol * max(1.0, scale))
        same_special = (np.isnan(r) & np.isnan(g)) | (np.isinf(r) & (r == g))
        bad = ~(within | same_special)
    abs_err, rel_err = _errors(r, g)
    worst_index = worst_values = None
    if bad.any():
        with np.errstate(invalid="ignore", over="ignore"):
            masked = np.where(bad, np.nan_to_num(np.abs(g - r), nan=np.inf, posinf=np.inf), -1.0)
        flat = int(np.argmax(masked))
        worst_index = tuple(int(i) for i in np.unravel_index(flat, ref.shape)) if ref.ndim else ()
        worst_values = (float(r.reshape(-1)[flat]), float(g.reshape(-1)[flat]))
    count = int(bad.sum())
    return TensorDiff(
        ref_stats, got_stats, count == 0, exact, count, int(ref.size), abs_err, rel_err, worst_index, worst_values
    )


def _errors(r: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    """Largest |onyxia - ort| and |onyxia - ort| / |ort| over the places both are finite (rel: ort != 0)."""
    both = np.isfinite(r) & np.isfinite(g)
    if not both.any():
        return 0.0, 0.0
    diff = np.abs(g[both] - r[both])
    nonzero = r[both] != 0
    rel = float((diff[nonzero] / np.abs(r[both][nonzero])).max()) if nonzero.any() else 0.0
    return float(diff.max()), rel
