"""com.microsoft DynamicQuantizeLSTM: 8-bit weights lowered to a dequantize and the float LSTM. Checked two ways
(quantized/dynamic_quantize_lstm.py gives the reasoning): against onnxruntime's LSTM on the same dequantized
weights, to float rounding (every case); and against onnxruntime's DynamicQuantizeLSTM within 2e-2, the error of
onnxruntime's own uint8 quantization of the activations (symmetric int8 weights, the form it accepts)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper
from oracle import onyxia_outputs, reference_outputs

RNG = np.random.default_rng(1618)
ACTIVATION_ROUNDING = 2e-2  # onnxruntime quantizes X and each h(t-1) to uint8: measured up to 9.8e-3


def quantized(w: np.ndarray, dtype: type, per_unit: bool, symmetric: bool) -> tuple[np.ndarray, ...]:
    """w [D, K, 4H] -> (q, scale, zero point), per direction or per direction and gate unit. Symmetric int8 uses
    [-63, 63] (zero point 0): onnxruntime refuses other zero points per unit, and its uint8 x int8 AVX2 kernel
    saturates pairwise sums of products with larger weights (see test_qlinear_matmul)."""
    axes = (1,) if per_unit else (1, 2)
    info = np.iinfo(dtype)
    if symmetric:
        scale = (np.abs(w).max(axis=axes, keepdims=True) / 63).astype(np.float32)
        zp = np.zeros_like(scale)
    else:
        lo, hi = np.minimum(w.min(axis=axes, keepdims=True), 0), np.maximum(w.max(axis=axes, keepdims=True), 0)
        scale = ((hi - lo) / (info.max - info.min)).astype(np.float32)
        zp = np.clip(np.rint(info.min - lo / scale), info.min, info.max)
    q = np.clip(np.rint(w / scale) + zp, info.min, info.max).astype(dtype)
    squeeze = (lambda a: a[:, 0, :]) if per_unit else (lambda a: a[:, 0, 0])
    return q, squeeze(scale), squeeze(zp).astype(dtype)


def model(op: str, inits: dict[str, np.ndarray], x_shape: tuple[int, ...], hidden: int, direction: str) -> object:
    names = ["x", "w", "r", "b", "", "", "", ""] + (["ws", "wz", "rs", "rz"] if op == "DynamicQuantizeLSTM" else [])
    names = names if op == "DynamicQuantizeLSTM" else ["x", "w", "r", "b"]
    domain = "com.microsoft" if op == "DynamicQuantizeLSTM" else ""
    node = helper.make_node(op, names, ["y", "yh", "yc"], domain=domain, hidden_size=hidden, direction=direction)
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info("x", 1, list(x_shape))],
        [helper.make_empty_tensor_value_info(o) for o in ("y", "yh", "yc")],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def run(
    dtype: type, per_unit: bool, symmetric: bool, direction: str, against_quantized: bool, fed: bool = False
) -> None:
    """Onyxia against onnxruntime's LSTM on the dequantized weights, and (`against_quantized`) its
    DynamicQuantizeLSTM; with `fed`, W and R are graph inputs rather than initializers."""
    d, seq, batch, inputs, hidden = (2 if direction == "bidirectional" else 1), 6, 3, 10, 8
    w = (RNG.standard_normal((d, inputs, 4 * hidden)) * 0.3).astype(np.float32)
    r = (RNG.standard_normal((d, hidden, 4 * hidden)) * 0.3).astype(np.float32)
    (wq, ws, wz), (rq, rs, rz) = quantized(w, dtype, per_unit, symmetric), quantized(r, dtype, per_unit, symmetric)
    bias = (RNG.standard_normal((d, 8 * hidden)) * 0.1).astype(np.float32)
    feeds = {"x": RNG.standard_normal((seq, batch, inputs)).astype(np.float32)}
    inits = {"w": wq, "r": rq, "b": bias, "ws": ws, "wz": wz, "rs": rs, "rz": rz}
    if fed:
        weights = {"w": inits.pop("w"), "r": inits.pop("r")}
    quant = model("DynamicQuantizeLSTM", inits, feeds["x"].shape, hidden, direction)
    if fed:
        for name, value in weights.items():
            elem = helper.np_dtype_to_tensor_dtype(value.dtype)
            quant.graph.input.append(helper.make_tensor_value_info(name, elem, list(value.shape)))
    got = onyxia_outputs(quant, feeds | weights if fed else feeds)

    def dequantized(q: np.ndarray, s: np.ndarray, z: np.ndarray) -> np.ndarray:
        shape = (d, 1, 4 * hidden) if per_unit else (d, 1, 1)
        f = (q.astype(np.int32) - z.astype(np.int32).reshape(shape)).astype(np.float32) * s.reshape(shape)
        return np.ascontiguousarray(f.transpose(0, 2, 1))

    floats = {"w": dequantized(wq, ws, wz), "r": dequantized(rq, rs, rz), "b": bias}
    float_lstm = reference_outputs(model("LSTM", floats, feeds["x"].shape, hidden, direction), feeds, "ort")
    ort_quant = reference_outputs(quant, feeds, "ort") if against_quantized else float_lstm
    for name, a, f, q in zip(("Y", "Y_h", "Y_c"), got, float_lstm, ort_quant):
        assert a.shape == f.shape and a.dtype == f.dtype
        float_error, quant_error = float(np.abs(a - f).max()), float(np.abs(a - q).max())
        assert float_error <= 1e-5, f"{name}: {float_error} from onnxruntime's LSTM on the dequantized weights"
        assert quant_error <= ACTIVATION_ROUNDING, f"{name}: {quant_error} from onnxruntime's DynamicQuantizeLSTM"


@pytest.mark.parametrize("per_unit", [False, True], ids=["per_direction", "per_unit"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_dynamic_quantize_lstm(per_unit: bool, direction: str) -> None:
    run(np.int8, per_unit, symmetric=True, direction=direction, against_quantized=True)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("per_unit", [False, True], ids=["per_direction", "per_unit"])
def test_dynamic_quantize_lstm_zero_points(dtype: type, per_unit: bool) -> None:
    """Asymmetric weights (zero points other than 0, which onnxruntime refuses per unit): the float reference."""
    run(dtype, per_unit, symmetric=False, direction="forward", against_quantized=False)


def test_weights_fed_at_run_time_are_dequantized_on_the_gpu() -> None:
    """W and R as graph inputs: the lowered Cast/Sub/Mul/Transpose run on the GPU instead of folding."""
    run(np.int8, per_unit=True, symmetric=False, direction="bidirectional", against_quantized=False, fed=True)
