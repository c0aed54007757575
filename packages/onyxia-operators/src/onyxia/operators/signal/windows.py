"""HannWindow, HammingWindow, BlackmanWindow: cosine-sum windows
``w[n] = a0 - a1 cos(2 pi n / D) + a2 cos(4 pi n / D)``, D = size (periodic) or size - 1 (symmetric).

A row is its three coefficients, taken as onnxruntime takes them (float32 constants, the sum in
double with numpy's pi), so a folded window equals onnxruntime's in every output dtype. The size
is usually a constant and the window folds; when it comes at run time (a graph input bound as a
dim by `MarkValueInputsPass`, or a size read back from the GPU) the window is a GPU kernel over a
symbolic length, in f32 math (float outputs only: an integer window truncates values near whole
numbers, where f32 and double disagree).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    SymbolicDim,
    SymbolicExpr,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal, type_defs
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["WINDOWS", "WindowOp", "output_datatype"]

_SOURCE = load_wgsl(__package__, "windows.wgsl")
_TAU = 2 * np.pi  # onnxruntime 1.32 (its source once used 3.14159265; its windows now match pi exactly)


@dataclass(frozen=True)
class WindowOp:
    """One cosine-sum window: its coefficients as float32 values (onnxruntime's `float a0, a1, a2`)."""

    a0: float
    a1: float
    a2: float = 0.0
    name: str = "window"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        return [TensorType(output_datatype(ctx), shape_of([_size(ctx)]))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        size = _size(ctx)
        if isinstance(size, SymbolicExpr):
            return None
        with np.errstate(all="ignore"):  # a symmetric window of size 1 divides by 0: NaN, as onnxruntime's
            n = np.arange(size, dtype=np.float64)
            increment = _TAU / (size if ctx.attr_int("periodic", 1) else size - 1)
            value = self.a0 - self.a1 * np.cos(increment * n)
            if self.a2:
                value = value + self.a2 * np.cos(2 * increment * n)
            return [value.astype(ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.output_tensor(0).dtype
        require_dtype(ctx, dtype, FLOATS, "output_datatype")
        size = _size(ctx)
        defs = {
            **type_defs(Y_T=dtype),
            "WORKGROUP_SIZE": WORKGROUP_SIZE,
            **{k: node_literal(ctx, DataType.FLOAT, v, "coefficient") for k, v in self.coefficients().items()},
        }
        shader = ctx.compile_shader("signal/windows", _SOURCE, defs, {"N": size, "DENOM": _denominator(ctx, size)})
        ctx.dispatch(shader, [], [ctx.output(0)], ceil_div(size, WORKGROUP_SIZE))

    def coefficients(self) -> dict[str, float]:
        return {"A0": self.a0, "A1": self.a1, "A2": self.a2}


def output_datatype(ctx: NodeCtx) -> DataType:
    """The ``output_datatype`` attribute (default 1, float) of windows and MelWeightMatrix."""
    code = ctx.attr_int("output_datatype", int(DataType.FLOAT))
    try:
        return DataType(code)
    except ValueError:
        raise ctx.error(f"output_datatype {code} is not an ONNX tensor type") from None


def _size(ctx: NodeCtx) -> SymbolicDim:
    value = ctx.require_value(0, "size")
    if value.size != 1:
        raise ctx.error(f"size (input 0) must be a scalar, found shape {list(value.shape)}")
    element = value.reshape(-1)[0]
    if isinstance(element, SymbolicExpr):  # bound at run time
        return element
    size = int(element)
    if size < 0:
        raise ctx.error(f"size (input 0) is {size}; expected a non-negative window length")
    return size


def _denominator(ctx: NodeCtx, size: SymbolicDim) -> SymbolicDim:
    return size if ctx.attr_int("periodic", 1) else size - 1


def _f32(value: float | np.floating) -> float:
    return float(np.float32(value))


_BLACKMAN_A2 = _f32(np.float32(0.16) / np.float32(2))
_HAMMING_A0 = _f32(np.float32(25) / np.float32(46))

WINDOWS: dict[str, WindowOp] = named_rows(
    {
        "HannWindow": WindowOp(0.5, 0.5),
        "HammingWindow": WindowOp(_HAMMING_A0, _f32(np.float32(1) - np.float32(_HAMMING_A0))),
        "BlackmanWindow": WindowOp(_f32(np.float32(0.5) - np.float32(_BLACKMAN_A2)), 0.5, _BLACKMAN_A2),
    }
)
