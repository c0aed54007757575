"""STFT (opset 17): ``signal [batch, length, 1 | 2]`` -> ``[batch, frames, bins, 2]``; a real
``[batch, length]`` signal too, as onnxruntime accepts it (torch's TorchScript exporter writes that).

Frame f holds samples ``f*frame_step .. f*frame_step + frame_length - 1``, times the window when
one is given; ``frames = (length - frame_length) // frame_step + 1``, so the signal length may be a
symbolic dim (an audio clip of any duration runs on one plan). frame_length comes from its input,
else the window's length, else the whole signal; frame_step and frame_length set the kernel's
structure (a run-time value gets a plan of its own, `onyxia.core.value_slots`). ``onesided``
(default 1) keeps bins 0..frame_length/2; with a complex signal it keeps those bins of the full
transform, as onnxruntime does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicDim, SymbolicExpr, TensorType, shape_of
from onyxia.operators.signal.dft import read_scalar
from onyxia.operators.signal.spectral import Spectrum, plan_spectrum, to_complex

__all__ = ["STFT", "StftOp"]


@dataclass(frozen=True)
class _Frames:
    step: int
    length: int  # frame_length: the DFT size
    count: SymbolicDim
    bins: int


@dataclass(frozen=True)
class StftOp:
    name: str = "STFT"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dims, frames = ctx.input_dims(0), _frames(ctx)
        return [TensorType(ctx.input_dtype(0), shape_of([dims[0], frames.count, frames.bins, 2]))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        x = ctx.input_value(0)
        window = ctx.input_value(2) if ctx.has_input(2) else np.ones(1)
        if x is None or window is None or x.dtype == object:
            return None
        frames = _frames(ctx)
        assert isinstance(frames.count, int)  # the signal's value is known, so is its length
        starts = np.arange(frames.count)[:, None] * frames.step + np.arange(frames.length)[None, :]
        segments = to_complex(x if x.ndim == 3 else x[..., None])[:, starts] * window.astype(np.float64)
        spectrum = np.fft.fft(segments, axis=-1)[..., : frames.bins]
        return [np.stack([spectrum.real, spectrum.imag], axis=-1).astype(ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        dims = ctx.input_dims(0)
        batch, length, parts = dims[0], dims[1], dims[2] if len(dims) == 3 else 1
        frames = _frames(ctx)
        spectrum = Spectrum(
            length=frames.length,
            bins=frames.bins,
            limit=frames.length,
            available=frames.length,
            batch=batch,
            inner=1,
            strides=(length * parts, frames.step * parts, parts, 0),
            complex_input=parts == 2,
            frames=frames.count,
        )
        plan_spectrum(ctx, spectrum, ctx.input(2) if ctx.has_input(2) else None)


def _frames(ctx: NodeCtx) -> _Frames:
    dims = ctx.input_dims(0)
    if len(dims) not in (2, 3) or (len(dims) == 3 and isinstance(dims[2], int) and dims[2] not in (1, 2)):
        raise ctx.error(f"signal (input 0) must be [batch, length, 1 | 2] or [batch, length], found shape {list(dims)}")
    step = read_scalar(ctx, 1, "frame_step")
    if step < 1:
        raise ctx.error(f"frame_step is {step}; expected a positive step")
    window = ctx.input_dims(2) if ctx.has_input(2) else None
    if window is not None and len(window) != 1:
        raise ctx.error(f"window (input 2) must be 1-D, found shape {list(window)}")
    length: SymbolicDim = dims[1]  # neither frame_length nor window: one frame of the whole signal
    if ctx.has_input(3):
        length = read_scalar(ctx, 3, "frame_length")
    elif window is not None:
        length = window[0]
    if window is not None and isinstance(window[0], SymbolicExpr):  # checked when the dims are bound
        ctx.constraints.append((window[0], length, f"node '{ctx.node.name}' (STFT) window length and frame_length"))
    elif window is not None and window[0] != length:
        raise ctx.error(f"window (input 2) has {window[0]} elements; frame_length is {length}")
    if not isinstance(length, int):
        raise ctx.error(f"frame_length must be known at compile time, found the symbolic {length}")
    if length < 1 or (isinstance(dims[1], int) and dims[1] < length):
        raise ctx.error(f"frame_length {length} does not fit a signal of length {dims[1]}")
    onesided = ctx.attr_int("onesided", 1)
    return _Frames(step, length, (dims[1] - length) // step + 1, length // 2 + 1 if onesided else length)


STFT: dict[str, StftOp] = {"STFT": StftOp()}
