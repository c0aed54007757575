"""com.microsoft DynamicQuantizeLSTM: an LSTM whose W [D, input, 4H] and R [D, H, 4H] are 8-bit, with a scale and
zero point per direction ([D]) or per direction and gate unit ([D, 4H]).

Route: the weights are dequantized once, on the host when the runtime uploads them (lazily, like every packed
weight), into the float LSTM's layout ([D, 4H, input], [D, 4H, H]: transposed), and the node runs on the float
LSTM's plan (recurrent/recurrent.py) through a view of its context in which inputs 1 and 2 are those float
weights. onnxruntime instead also quantizes the activations, X and every h(t-1), to uint8 with a dynamic
per-GEMM range (its quantized GEMMs), which costs it up to half a quantization step per activation: so Onyxia
equals onnxruntime's float LSTM on the dequantized weights (to float rounding), and differs from onnxruntime's
DynamicQuantizeLSTM by onnxruntime's own activation rounding (measured: at most 9.8e-3 on outputs of magnitude
< 1 over 12 random symmetric-int8 models; the test accepts 2e-2 and checks both). onnxruntime refuses zero points
other than 0 per gate unit; Onyxia applies any zero point. The weights must be compile-time constants
(quantize_dynamic stores them as initializers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from onyxia.core import (
    BufferRef,
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    TensorShape,
    TensorType,
    TensorValue,
    UnsupportedOpError,
    shape_of,
)
from onyxia.operators.quantized.qlinear_params import byte_operand, same_dtype, scale_input
from onyxia.operators.recurrent import RECURRENT

__all__ = ["DYNAMIC_QUANTIZE_LSTM_MS", "DynamicQuantizeLSTMOp"]

_LSTM = RECURRENT["LSTM"]
_QUANTIZED = {1: ("W", 8, 9), 2: ("R", 10, 11)}  # input -> (name, scale input, zero point input)
Ctx = TypeVar("Ctx", bound=NodeCtx)


class _FloatWeights:
    """Mixed in before a context's class: inputs 1 and 2 read as the float LSTM's W and R."""

    float_dims: dict[int, tuple[SymbolicDim, ...]]
    float_buffers: dict[int, BufferRef]

    def input_shape(self, i: int) -> TensorShape:
        if i in self.float_dims:
            return shape_of(list(self.float_dims[i]))
        return super().input_shape(i)  # type: ignore[misc, no-any-return]

    def input_dtype(self, i: int) -> DataType:
        return DataType.FLOAT if i in self.float_dims else super().input_dtype(i)  # type: ignore[misc, no-any-return]

    def input(self, i: int) -> BufferRef:
        if i in self.float_buffers:
            return self.float_buffers[i]
        return super().input(i)  # type: ignore[misc, no-any-return]


_VIEWS: dict[type, type] = {}


def _float_view(ctx: Ctx, buffers: dict[int, BufferRef] | None = None) -> Ctx:
    """`ctx` as the float LSTM sees it: W and R transposed to [D, 4H, K], float32."""
    dims = {}
    for i in _QUANTIZED:
        d, k, gates = ctx.input_dims(i)
        dims[i] = (d, gates, k)
    cls = _VIEWS.setdefault(type(ctx), type(f"FloatWeights{type(ctx).__name__}", (_FloatWeights, type(ctx)), {}))
    view: Any = object.__new__(cls)
    view.__dict__.update(vars(ctx))
    view.float_dims, view.float_buffers = dims, buffers or {}
    return view  # type: ignore[no-any-return]


def _check(ctx: NodeCtx) -> None:
    for i, (name, scale, zp) in _QUANTIZED.items():
        byte_operand(ctx, i, name)
        if ctx.input_rank(i) != 3:
            raise ctx.error(f"input {i} ({name}) has rank {ctx.input_rank(i)}; expected [D, K, 4 * hidden_size]")
        scale_input(ctx, scale, f"{name}_scale")
        same_dtype(ctx, zp, i, f"{name}_zero_point")
        d, gates = ctx.input_dims(i)[0], ctx.input_dims(i)[2]
        for p, what in ((scale, f"{name}_scale"), (zp, f"{name}_zero_point")):
            if ctx.has_input(p) and list(ctx.input_dims(p)) not in ([d], [d, gates]):
                raise ctx.error(
                    f"input {p} ({what}) has dims {list(ctx.input_dims(p))}; expected [{d}] or [{d}, {gates}]"
                )


def _dequantized(ctx: PlanCtx, i: int) -> BufferRef:
    """Input `i` (W or R) dequantized and transposed to [D, 4H, K] float32, as a lazy constant."""
    name, scale_at, zp_at = _QUANTIZED[i]
    tensor = ctx.input_tensor(i)
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    scale = ctx.input_value(scale_at)
    zp = ctx.input_value(zp_at) if ctx.has_input(zp_at) else np.zeros(1, np.int32)
    symbolic = any(isinstance(v, np.ndarray) and v.dtype == np.dtype(object) for v in (source, scale, zp))
    if source is None or scale is None or zp is None or symbolic:
        raise UnsupportedOpError(
            f"node '{ctx.node.name}' ({ctx.node.op_type}): input {i} ({name}) and its scale and zero point must be "
            "compile-time constants (expected a compile-time constant: they are dequantized when uploaded)"
        )
    d, k, gates = ctx.require_static(i)

    def load() -> np.ndarray:
        q = np.asarray(source.numpy() if isinstance(source, TensorValue) else source).reshape(d, k, gates)
        per_unit = np.asarray(scale).size > d
        shape = (d, 1, gates) if per_unit else (d, 1, 1)
        z = np.asarray(zp, np.int32).reshape(shape if np.asarray(zp).size > 1 else (1, 1, 1))
        w = (q.astype(np.int32) - z).astype(np.float32) * np.asarray(scale, np.float32).reshape(shape)
        return np.ascontiguousarray(w.transpose(0, 2, 1))

    key = f"{tensor.name}:dequantized-lstm"
    return ctx.constant(key, TensorValue(DataType.FLOAT, (d, gates, k), load, name=key))


@dataclass(frozen=True)
class DynamicQuantizeLSTMOp(OperatorBase):
    name: str = "DynamicQuantizeLSTM"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        _check(ctx)
        return _LSTM.infer_output_shapes(_float_view(ctx))

    def try_fold(self, ctx: FoldCtx) -> Sequence[np.ndarray] | None:
        return None  # as LSTM: a recurrence over constants runs on the GPU

    def plan(self, ctx: PlanCtx) -> None:
        _check(ctx)
        _LSTM.plan(_float_view(ctx, {i: _dequantized(ctx, i) for i in _QUANTIZED}))


DYNAMIC_QUANTIZE_LSTM_MS: dict[str, DynamicQuantizeLSTMOp] = {"DynamicQuantizeLSTM": DynamicQuantizeLSTMOp()}
