"""The spectral kernel DFT and STFT share: one invocation per output bin, a direct sum over samples.

Both ops read their input as ``x[b, f, n, c]`` at scalar offset ``b*SB + f*SF + n*SN + c*SI`` (a DFT
has one "frame" and its inner dims as c; an STFT has one c and its frames step by frame_step), so a
`Spectrum` row of strides is all that differs. Twiddles come from a host table of ``e^(2 pi i m/N)``
computed in double and rounded once, so the only f32 error is the sum's (an O(N) chain per bin,
well inside the error onnxruntime's own f32 DFT shows against numpy's double FFT).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import BufferRef, PlanCtx, SymbolicDim, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["Spectrum", "plan_spectrum", "to_complex"]

_SOURCE = load_wgsl(__package__, "spectral.wgsl")


@dataclass(frozen=True)
class Spectrum:
    """One spectral dispatch: which sums, over which input elements, into which output layout.

    Output elements are ``[batch, frames, bins, inner]`` complex pairs (one real value for IRFFT);
    bin k sums ``min(available, limit)`` samples (zero padding past the input, truncation past N)."""

    length: int  # N, the DFT size
    bins: int  # output bins per transform
    limit: int  # samples (bins, for IRFFT) a sum may use: N, or N // 2 + 1 for IRFFT
    available: SymbolicDim  # samples the input has along the transformed axis
    batch: SymbolicDim
    inner: SymbolicDim
    strides: tuple[SymbolicDim, SymbolicDim, SymbolicDim, SymbolicDim]  # SB, SF, SN, SI in scalars
    complex_input: bool
    inverse: bool = False
    irfft: bool = False
    frames: SymbolicDim = 1


def plan_spectrum(ctx: PlanCtx, spectrum: Spectrum, window: BufferRef | None = None) -> None:
    dtype = ctx.input_dtype(0)
    require_dtype(ctx, dtype, FLOATS, "signal")
    count = dims_product([spectrum.batch, spectrum.frames, spectrum.bins, spectrum.inner])
    if count == 0:
        return
    flags = {
        "COMPLEX_IN": spectrum.complex_input,
        "INVERSE": spectrum.inverse,
        "IRFFT": spectrum.irfft,
        "WINDOW": window is not None,
    }
    defs = {**type_defs(X_T=dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE, **{k: True for k, on in flags.items() if on}}
    sb, sf, sn, si = spectrum.strides
    dims = {
        "COUNT": count,
        "INNER": spectrum.inner,
        "BINS": spectrum.bins,
        "FRAMES": spectrum.frames,
        "SB": sb,
        "SF": sf,
        "SN": sn,
        "SI": si,
        "AVAIL": spectrum.available,
        "LIMIT": spectrum.limit,
        "N": spectrum.length,
    }
    shader = ctx.compile_shader("signal/spectral", _SOURCE, defs, dims)
    table = ctx.constant(f"signal:twiddles:{spectrum.length}", _twiddles(spectrum.length))
    reads = [ctx.input(0), table, *([window] if window is not None else [])]
    ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(count, WORKGROUP_SIZE))


def to_complex(x: np.ndarray) -> np.ndarray:
    """A ``[..., 1]`` real or ``[..., 2]`` (re, im) host array as complex128 ``[...]``."""
    values = x.astype(np.float64)
    return values[..., 0] + 1j * values[..., 1] if x.shape[-1] == 2 else values[..., 0].astype(np.complex128)


def _twiddles(length: int) -> np.ndarray:
    """(cos, sin) of ``2 pi m / N`` for m < N, in double then f32: ``[N, 2]``."""
    angle = 2 * np.pi * np.arange(length, dtype=np.float64) / length
    return np.stack([np.cos(angle), np.sin(angle)], axis=-1).astype(np.float32)
