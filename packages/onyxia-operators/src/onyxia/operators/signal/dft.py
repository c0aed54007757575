"""DFT (opset 17: axis attribute; opset 20: axis input) over ``[..., signal, ..., 1 | 2]`` inputs.

The last dim holds the real part (1) or the (re, im) pair (2); the axis is any other dim. Four forms:
the full forward or inverse transform (complex out), RFFT (``onesided=1``: bins 0..N/2), and IRFFT
(``onesided=1, inverse=1``: bins 0..N/2 of a Hermitian spectrum in, the real signal of length N out,
N defaulting to ``2 * (bins - 1)``). ``dft_length`` zero-pads or truncates the axis. dft_length and
the opset-20 axis set the kernel's structure, so a run-time value gets a plan of its own
(`onyxia.core.value_slots`); a constant input folds through numpy's double FFT.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicExpr, TensorType, shape_of
from onyxia.core.shapes import dims_product
from onyxia.operators.signal.spectral import Spectrum, plan_spectrum, to_complex

__all__ = ["DFT", "DftOp", "read_scalar"]


@dataclass(frozen=True)
class _Transform:
    axis: int  # normalized, < rank - 1
    length: int  # N
    onesided: bool
    inverse: bool

    @property
    def irfft(self) -> bool:
        return self.onesided and self.inverse

    @property
    def bins(self) -> int:
        return self.length // 2 + 1 if self.onesided and not self.inverse else self.length


@dataclass(frozen=True)
class DftOp:
    axis_input: bool  # opset 20 reads the axis from input 2 (default -2); opset 17 from the attribute (default 1)
    name: str = "DFT"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dims, t = ctx.input_dims(0), self._transform(ctx)
        out = [*dims[:-1], 1 if t.irfft else 2]
        out[t.axis] = t.bins
        return [TensorType(ctx.input_dtype(0), shape_of(out))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        x = ctx.input_value(0)
        if x is None or x.dtype == object:
            return None
        t = self._transform(ctx)
        signal = to_complex(x)
        if t.irfft:
            result = np.fft.irfft(signal, n=t.length, axis=t.axis)[..., None]
        else:
            spectrum = (np.fft.ifft if t.inverse else np.fft.fft)(signal, n=t.length, axis=t.axis)
            spectrum = np.take(spectrum, np.arange(t.bins), axis=t.axis)
            result = np.stack([spectrum.real, spectrum.imag], axis=-1)
        return [result.astype(ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        dims, t = ctx.input_dims(0), self._transform(ctx)
        parts = 2 if _complex_input(ctx) else 1
        inner = dims_product(dims[t.axis + 1 : -1])
        available = dims[t.axis]
        spectrum = Spectrum(
            length=t.length,
            bins=t.bins,
            limit=t.length // 2 + 1 if t.irfft else t.length,
            available=available,
            batch=dims_product(dims[: t.axis]),
            inner=inner,
            strides=(available * inner * parts, 0, inner * parts, parts),
            complex_input=parts == 2,
            inverse=t.inverse,
            irfft=t.irfft,
        )
        plan_spectrum(ctx, spectrum)

    def _transform(self, ctx: NodeCtx) -> _Transform:
        dims = ctx.input_dims(0)
        rank = len(dims)
        if rank < 2 or (isinstance(dims[-1], int) and dims[-1] not in (1, 2)):
            raise ctx.error(f"input 0 must end in a dim of 1 (real) or 2 (re, im), found shape {list(dims)}")
        onesided, inverse = bool(ctx.attr_int("onesided", 0)), bool(ctx.attr_int("inverse", 0))
        axis = read_scalar(ctx, 2, "axis") if self.axis_input and ctx.has_input(2) else None
        if axis is None:
            axis = -2 if self.axis_input else ctx.attr_int("axis", 1)
        if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
            raise ctx.error(f"axis {axis} is out of range for rank {rank}: expected [-{rank}, -2] or [0, {rank - 2}]")
        axis %= rank
        if onesided and inverse and not _complex_input(ctx):
            raise ctx.error("onesided=1 with inverse=1 (IRFFT) takes a complex input ([..., 2])")
        length = read_scalar(ctx, 1, "dft_length") if ctx.has_input(1) else None
        if length is None:
            available = dims[axis]
            if not isinstance(available, int):
                raise ctx.error(f"the DFT along axis {axis} of symbolic size {available} needs a constant dft_length")
            length = 2 * (available - 1) if onesided and inverse else available
        if length < 1:
            raise ctx.error(f"dft_length is {length}; expected a positive transform length")
        return _Transform(axis, length, onesided, inverse)


def _complex_input(ctx: NodeCtx) -> bool:
    return ctx.input_dims(0)[-1] == 2


def read_scalar(ctx: NodeCtx, index: int, what: str) -> int:
    value = ctx.require_value(index, what)
    element = value.reshape(-1)[0] if value.size == 1 else None
    if element is None or isinstance(element, SymbolicExpr):
        raise ctx.error(f"{what} (input {index}) must be one integer known at compile time, found {value.tolist()}")
    return int(element)


DFT: dict[tuple[str, int, int | None], DftOp] = {
    ("DFT", 17, 19): DftOp(axis_input=False),
    ("DFT", 20, None): DftOp(axis_input=True),
}
