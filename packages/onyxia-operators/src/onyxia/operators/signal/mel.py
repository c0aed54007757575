"""MelWeightMatrix: the [dft_length // 2 + 1, num_mel_bins] triangular filter bank, made on the host.

Every input is a scalar that decides the whole matrix (its shape and each weight), so the op always
folds: inputs that come at run time are structural slots (`onyxia.core.value_slots`), and the plan
is made for their values (`compiler.deferred`). The arithmetic is onnxruntime's, step by step (the
mel points in double, the bin edges floored, each weight divided in the output dtype), so the
matrix equals onnxruntime's exactly; bin edges outside the spectrogram are an error naming the input
instead of onnxruntime's out-of-range write.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicExpr, TensorType, shape_of
from onyxia.core.shapes import dims_product
from onyxia.operators.signal.windows import output_datatype

__all__ = ["MEL", "MelWeightMatrixOp"]

_INPUTS = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")


@dataclass(frozen=True)
class MelWeightMatrixOp:
    name: str = "MelWeightMatrix"
    always_fold: bool = True  # a matrix from five scalars: computed on the host at any size

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        bins, length, *_ = _arguments(ctx)
        return [TensorType(output_datatype(ctx), shape_of([length // 2 + 1, bins]))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray]:
        return [_matrix(ctx)]

    def plan(self, ctx: PlanCtx) -> None:
        """Reached only when folding was skipped: the host matrix is uploaded and copied out."""
        value = _matrix(ctx)
        source = ctx.constant(f"{ctx.node.name}:mel_weights", value)
        ctx.copy(source, ctx.output(0), dims_product(value.shape) * ctx.output_tensor(0).dtype.gpu_numpy.itemsize)


def _arguments(ctx: NodeCtx) -> tuple[int, int, int, float, float]:
    values = []
    for i, name in enumerate(_INPUTS):
        value = ctx.require_value(i, name)
        if value.size != 1 or value.dtype == object and isinstance(value.reshape(-1)[0], SymbolicExpr):
            raise ctx.error(f"{name} (input {i}) must be one number known at compile time, found {value.tolist()}")
        values.append(value.reshape(-1)[0])
    bins, length, rate = (int(v) for v in values[:3])
    if bins < 1 or length < 1 or rate < 1:
        raise ctx.error(f"num_mel_bins, dft_length and sample_rate must be positive, found {bins}, {length}, {rate}")
    return bins, length, rate, float(np.float32(values[3])), float(np.float32(values[4]))


def _matrix(ctx: NodeCtx) -> np.ndarray:
    bins, length, rate, lower, upper = _arguments(ctx)
    spectrogram_bins = length // 2 + 1
    low, high = _hz_to_mel(lower), _hz_to_mel(upper)
    step = (high - low) / float(np.float32(bins + 2))
    points = _mel_to_hz(low + step * np.arange(bins + 2, dtype=np.float64))
    edges = np.floor((length + 1) * points / rate)
    # onnxruntime's own check (in float32) on the two edge frequencies, then ours on every edge it writes
    # at: the last point falls short of upper_edge_hertz, and its edge is only ever an exclusive bound
    limits = [np.floor(np.float32(length + 1) * np.float32(hz) / np.float32(rate)) for hz in (lower, upper)]
    if not (
        all(0 <= v < spectrogram_bins for v in limits) and edges.min() >= 0 and edges[:-1].max() < spectrogram_bins
    ):
        raise ctx.error(
            f"lower_edge_hertz {lower} and upper_edge_hertz {upper} put filter edges at spectrogram bins "
            f"{int(min(limits))}..{int(max(limits))}, outside 0..{spectrogram_bins - 1} for dft_length {length} "
            f"and sample_rate {rate}"
        )
    dtype = output_datatype(ctx).numpy
    out = np.zeros((spectrogram_bins, bins), dtype=dtype)
    index = edges.astype(np.int64)
    for i in range(bins):
        left, center, right = index[i], index[i + 1], index[i + 2]
        if center == left:
            out[center, i] = 1
        else:
            out[left : center + 1, i] = _ratio(np.arange(left, center + 1) - left, center - left, dtype)
        if right > center:
            out[center:right, i] = _ratio(right - np.arange(center, right), right - center, dtype)
    return out


def _ratio(numerator: np.ndarray, denominator: int, dtype: np.dtype) -> np.ndarray:
    """onnxruntime's ``(j - left) / T(width)``: a division in the output dtype (integer division for ints)."""
    if np.issubdtype(dtype, np.integer):
        return (numerator // denominator).astype(dtype)
    return numerator.astype(dtype) / dtype.type(denominator)


def _hz_to_mel(hz: float) -> float:
    return float(2595 * np.log10(1 + hz / 700))


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    return np.asarray(700 * (np.power(10.0, mels / 2595) - 1))


MEL: dict[str, MelWeightMatrixOp] = {"MelWeightMatrix": MelWeightMatrixOp()}
