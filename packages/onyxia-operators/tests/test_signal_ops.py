"""Signal ops against onnxruntime: windows, MelWeightMatrix, DFT, STFT, and a log-mel front end.

Windows and mel matrices fold on the host with onnxruntime's arithmetic, so they must equal its
output exactly. DFT and STFT sum in f32 in another order than onnxruntime, whose naive kernel (any
length that is not a power of two) also rounds each angle ``2 pi k n / N`` in f32, an error that
grows like N^1.5 (measured at N = 3000: 4.5e-2 on a peak of 151, against 3.6e-4 for Onyxia's
table of double-precision twiddles). So spectra are checked twice (`_check_spectrum`): against
onnxruntime's float64 kernel on the same inputs within 4e-6 of the peak magnitude (measured worst:
2.4e-6 at N = 3000, 1.7e-6 at N = 1024), and against onnxruntime's float32 output within that bound
plus the error onnxruntime's float32 output itself shows against its float64 one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracle import (
    assert_close,
    check_model,
    check_op,
    check_rebinding,
    compile_model,
    make_model,
    onyxia_outputs,
    reference_outputs,
    runtime,
)

from onyxia.core import OnyxiaError, ShapeInferenceError

RNG = np.random.default_rng(17)
WINDOWS = ("HannWindow", "HammingWindow", "BlackmanWindow")
_PEAK_BOUND = 4e-6  # |Onyxia - float64| / peak |y|; the module docstring gives the measurements


# ----- windows ---------------------------------------------------------------------------------
@pytest.mark.parametrize("op", WINDOWS)
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8])
def test_window_folds_like_onnxruntime(op: str, periodic: int, dtype: int) -> None:
    size = np.array(37, np.int64)
    attrs = {"periodic": periodic, "output_datatype": dtype}
    check_op(op, {"size": size}, attrs, opset=17, initializers=["size"], tolerance=(0.0, 0.0))
    assert not compile_model(make_model(op, {"size": size}, attrs, opset=17, initializers=["size"])).operations


@pytest.mark.parametrize("op", WINDOWS)
@pytest.mark.parametrize("periodic", [0, 1])
def test_window_of_run_time_size_runs_on_gpu(op: str, periodic: int) -> None:
    # the size is a graph input: bound as a dim, one plan serves every size; f32 math within 1e-6
    model = make_model(op, {"size": np.array(8, np.int32)}, {"periodic": periodic}, opset=17)
    assert compile_model(model).operations, "a run-time size must plan a GPU kernel"
    check_rebinding(model, [{"size": np.array(n, np.int32)} for n in (400, 7, 1024)])


# ----- MelWeightMatrix -------------------------------------------------------------------------
_MEL_CASES = [
    (8, 16, 8192, 0.0, 4096.0),  # the ONNX backend case's arguments
    (40, 400, 16000, 20.0, 7600.0),  # Kaldi-style filter bank, n_fft 400
    (80, 512, 16000, 0.0, 8000.0),  # Whisper-sized
    (64, 1024, 22050, 125.0, 3800.0),  # narrow band: several filters one bin wide (height 1)
]


@pytest.mark.parametrize(("bins", "length", "rate", "lower", "upper"), _MEL_CASES)
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.INT32])
def test_mel_weight_matrix_equals_onnxruntime(
    bins: int, length: int, rate: int, lower: float, upper: float, dtype: int
) -> None:
    inputs = _mel_inputs(bins, length, rate, lower, upper)
    check_op("MelWeightMatrix", inputs, {"output_datatype": dtype}, opset=17, initializers=list(inputs))


def test_mel_weight_matrix_from_run_time_inputs() -> None:
    # every input is a graph input: the plan is made for the values given to run()
    inputs = _mel_inputs(*_MEL_CASES[1])
    check_op("MelWeightMatrix", inputs, opset=17, tolerance=(0.0, 0.0))


def test_mel_weight_matrix_rejects_edges_past_the_spectrogram() -> None:
    inputs = _mel_inputs(10, 64, 8000, 0.0, 7000.0)  # upper edge above Nyquist: bins past dft_length / 2
    with pytest.raises(ShapeInferenceError, match=r"MelWeightMatrix.*upper_edge_hertz 7000.0.*outside 0..32"):
        compile_model(make_model("MelWeightMatrix", inputs, opset=17, initializers=list(inputs)))


def _mel_inputs(bins: int, length: int, rate: int, lower: float, upper: float) -> dict[str, np.ndarray]:
    return {
        "num_mel_bins": np.array(bins, np.int64),
        "dft_length": np.array(length, np.int64),
        "sample_rate": np.array(rate, np.int64),
        "lower_edge_hertz": np.array(lower, np.float32),
        "upper_edge_hertz": np.array(upper, np.float32),
    }


# ----- DFT -------------------------------------------------------------------------------------
_DFT_CASES = [
    # (shape, attrs, dft_length, axis): axis None means the opset's default
    ((2, 10, 1), {}, None, 1),
    ((2, 12, 2), {}, None, 1),
    ((2, 12, 2), {"inverse": 1}, None, 1),
    ((3, 16, 1), {"onesided": 1}, None, 1),
    ((3, 15, 1), {"onesided": 1}, None, 1),  # odd length RFFT
    ((2, 9, 2), {"onesided": 1, "inverse": 1}, None, 1),  # IRFFT, N = 2 * (9 - 1)
    ((2, 9, 2), {"onesided": 1, "inverse": 1}, 17, 1),  # IRFFT of odd length
    ((2, 10, 1), {}, 16, 1),  # zero-padded
    ((2, 10, 2), {"inverse": 1}, 7, 1),  # truncated
    ((2, 3, 5, 4, 2), {}, None, 2),  # a middle axis: dims on both sides
    ((2, 3, 5, 4, 1), {"onesided": 1}, 12, 3),
    ((4, 400, 1), {"onesided": 1}, None, 1),  # n_fft 400 (Whisper), naive in onnxruntime
    ((2, 512, 1), {"onesided": 1}, None, 1),  # radix-2 in onnxruntime
    ((2, 1000, 2), {}, None, 1),
    ((1, 3000, 1), {"onesided": 1}, None, 1),
]


@pytest.mark.parametrize(("shape", "attrs", "length", "axis"), _DFT_CASES, ids=str)
@pytest.mark.parametrize("opset", [17, 20])
def test_dft(shape: tuple[int, ...], attrs: dict[str, int], length: int | None, axis: int, opset: int) -> None:
    x = RNG.standard_normal(shape).astype(np.float32)
    inputs: dict[str, np.ndarray | None] = {"x": x, "dft_length": None if length is None else np.array(length)}
    if opset == 20:
        inputs["axis"] = np.array(axis - len(shape), np.int64)  # the negative spelling
        model = make_model("DFT", inputs, attrs, opset=20, initializers=["dft_length", "axis"])
    else:
        model = make_model("DFT", inputs, {**attrs, "axis": axis}, opset=17, initializers=["dft_length"])
    _check_spectrum(model, {"x": x})


@pytest.mark.parametrize(("bins", "length"), [(9, 10), (6, 30), (5, 5)])
def test_irfft_of_other_bin_counts_follows_the_onnx_reference(bins: int, length: int) -> None:
    # bins 0..length // 2 are read, the rest dropped or zero (numpy's irfft, and onnx.reference's DFT);
    # onnxruntime 1.32 reads such inputs otherwise (off by up to 0.4 from both), so it is no oracle here
    x = RNG.standard_normal((2, bins, 2)).astype(np.float32)
    model = make_model(
        "DFT", {"x": x, "n": np.array(length)}, {"onesided": 1, "inverse": 1}, opset=17, initializers=["n"]
    )
    expected = reference_outputs(model, {"x": x}, "onnx")[0]
    bound = _PEAK_BOUND * float(np.abs(expected).max()) + 1e-6
    assert_close(onyxia_outputs(model, {"x": x})[0], expected, "irfft", tolerance=(0.0, bound))


def test_dft_structural_inputs_at_run_time() -> None:
    # dft_length and axis fed at run time: each value gets its plan, a value seen before reuses it
    x = RNG.standard_normal((2, 6, 8, 2)).astype(np.float32)
    inputs: dict[str, np.ndarray] = {"x": x, "dft_length": np.array(8, np.int64), "axis": np.array(1, np.int64)}
    model = make_model("DFT", inputs, {"inverse": 1}, opset=20)
    executor = runtime().load_model(compile_model(model))
    created = []
    for length, axis in ((8, 1), (5, 2), (8, 1)):
        feeds: dict[str, np.ndarray] = {"x": x, "dft_length": np.array(length), "axis": np.array(axis)}
        _check_spectrum(model, feeds, onyxia=executor.run(feeds)["y0"])
        created.append(executor.stats.pipelines_created)
    assert created[2] == created[1] > created[0], f"pipelines created after each run: {created}"


def test_dft_symbolic_batch_runs_at_two_sizes() -> None:
    x = RNG.standard_normal((3, 20, 1)).astype(np.float32)
    model = make_model("DFT", {"x": x}, {"onesided": 1}, opset=17, dim_params={"x": ["batch", 20, 1]})
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for batch in (3, 5):
        feeds = {"x": RNG.standard_normal((batch, 20, 1)).astype(np.float32)}
        _check_spectrum(model, feeds, onyxia=executor.run(feeds)["y0"])
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines, "a new batch size recompiled"


def test_dft_of_a_constant_folds() -> None:
    x = np.arange(24, dtype=np.float32).reshape(1, 12, 2)
    model = make_model("DFT", {"x": x}, {"inverse": 1}, opset=17, initializers=["x"])
    assert not compile_model(model).operations
    check_model(model, {}, tolerance=(1e-5, 1e-5))


def test_dft_rejects_a_last_dim_other_than_1_or_2() -> None:
    # (an axis out of range and IRFFT of a real input are refused by the loader's schema check already)
    model = make_model("DFT", {"x": np.zeros((2, 8, 3), np.float32)}, opset=17)
    with pytest.raises(
        ShapeInferenceError, match=r"\(DFT, domain ai.onnx\): input 0 must end in a dim of 1 \(real\) or 2"
    ):
        compile_model(model)


# ----- STFT ------------------------------------------------------------------------------------
_STFT_CASES = [
    # (signal shape, frame_step, window length or None, frame_length or None, onesided)
    ((1, 128, 1), 8, None, 16, 1),
    ((2, 200, 1), 10, 32, None, 1),  # frame_length from the window
    ((2, 200, 1), 10, 32, 32, 0),
    ((2, 150, 2), 7, 20, 20, 0),  # complex signal
    ((1, 1600, 1), 160, 400, 400, 1),  # Whisper's hop and n_fft
    ((2, 200), 10, 32, 32, 1),  # a real [batch, length] signal, as torch's TorchScript exporter writes it
]


@pytest.mark.parametrize(("shape", "step", "window", "length", "onesided"), _STFT_CASES, ids=str)
def test_stft(shape: tuple[int, ...], step: int, window: int | None, length: int | None, onesided: int) -> None:
    signal = RNG.standard_normal(shape).astype(np.float32)
    inputs: dict[str, np.ndarray | None] = {
        "signal": signal,
        "frame_step": np.array(step, np.int64),
        "window": None if window is None else _hann(window),
        "frame_length": None if length is None else np.array(length, np.int64),
    }
    model = make_model("STFT", inputs, {"onesided": onesided}, opset=17, initializers=["frame_step", "frame_length"])
    feeds = {"signal": signal}
    if window is not None:
        feeds["window"] = _hann(window)
    _check_spectrum(model, feeds)


def test_stft_of_symbolic_length_runs_at_three_lengths() -> None:
    signal = RNG.standard_normal((1, 300, 1)).astype(np.float32)
    inputs: dict[str, np.ndarray] = {"signal": signal, "frame_step": np.array(16, np.int64), "window": _hann(64)}
    model = make_model(
        "STFT", inputs, opset=17, initializers=["frame_step", "window"], dim_params={"signal": [1, "samples", 1]}
    )
    executor_model = compile_model(model)
    assert executor_model.operations
    for samples in (300, 64, 1000):
        feeds = {"signal": RNG.standard_normal((1, samples, 1)).astype(np.float32)}
        _check_spectrum(model, feeds)


def test_stft_rejects_a_window_of_another_length() -> None:
    inputs: dict[str, np.ndarray] = {
        "signal": np.zeros((1, 64, 1), np.float32),
        "frame_step": np.array(4, np.int64),
        "window": np.ones(10, np.float32),
        "frame_length": np.array(16, np.int64),
    }
    # frame_length fed at run time (the loader's own check catches a constant one): the plan for its value refuses
    model = make_model("STFT", inputs, opset=17, initializers=["frame_step", "window"])
    executor = runtime().load_model(compile_model(model))
    feeds = {"signal": inputs["signal"], "frame_length": inputs["frame_length"]}
    with pytest.raises(OnyxiaError, match=r"\(STFT, domain ai.onnx\): window \(input 2\) has 10 elements"):
        executor.run(feeds)


# ----- a log-mel front end ---------------------------------------------------------------------
def test_log_mel_spectrogram_front_end() -> None:
    """torch.stft(center=False, window=hann) magnitudes times a mel filter bank, then log, as one model.

    The log turns the spectrum's error relative to its peak into an absolute error in the quiet mel
    bands (the 20 Hz filter sees a few bins near DC): there onnxruntime's float32 front end is up to
    2.6e-4 from its float64 one; Onyxia's, measured worst 1.9e-6, must stay within 2e-5 of float64."""
    model, double = _log_mel_model(TensorProto.FLOAT), _log_mel_model(TensorProto.DOUBLE)
    for batch, samples in ((2, 16000), (1, 4000)):
        audio = (0.1 * RNG.standard_normal((batch, samples, 1))).astype(np.float32)
        actual = onyxia_outputs(model, {"audio": audio})[0]
        ort32 = reference_outputs(model, {"audio": audio}, "ort")[0]
        ort64 = reference_outputs(double, {"audio": audio.astype(np.float64)}, "ort")[0]
        _assert_near_double(actual, ort32, ort64, 2e-5)


def _log_mel_model(dtype: int) -> onnx.ModelProto:
    n_fft, hop, mels, rate = 400, 160, 40, 16000
    nodes = [
        helper.make_node("HannWindow", ["n_fft"], ["window"], output_datatype=dtype),
        helper.make_node("STFT", ["audio", "hop", "window", "n_fft"], ["spec"], onesided=1),
        helper.make_node("Mul", ["spec", "spec"], ["squares"]),
        helper.make_node("ReduceSum", ["squares", "last"], ["power"], keepdims=0),
        helper.make_node("Sqrt", ["power"], ["magnitude"]),
        helper.make_node(
            "MelWeightMatrix", ["mels", "n_fft", "rate", "low", "high"], ["filters"], output_datatype=dtype
        ),
        helper.make_node("MatMul", ["magnitude", "filters"], ["mel"]),
        helper.make_node("Add", ["mel", "floor"], ["floored"]),
        helper.make_node("Log", ["floored"], ["log_mel"]),
    ]
    constants: dict[str, np.ndarray] = {
        "n_fft": np.array(n_fft, np.int64),
        "hop": np.array(hop, np.int64),
        "last": np.array([-1], np.int64),
        "mels": np.array(mels, np.int64),
        "rate": np.array(rate, np.int64),
        "low": np.array(20.0, np.float32),
        "high": np.array(7600.0, np.float32),
        "floor": np.array(1e-6, helper.tensor_dtype_to_np_dtype(dtype)),
    }
    graph = helper.make_graph(
        nodes,
        "log_mel",
        [helper.make_tensor_value_info("audio", dtype, ["batch", "samples", 1])],
        [helper.make_tensor_value_info("log_mel", dtype, None)],
        [onnx.numpy_helper.from_array(v, k) for k, v in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


# ----- helpers ---------------------------------------------------------------------------------
def _hann(length: int) -> np.ndarray:
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(length) / length)).astype(np.float32)


def _check_spectrum(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], onyxia: Any = None) -> None:
    """Onyxia's f32 spectrum within `_PEAK_BOUND` of onnxruntime's float64 one, and within that plus
    onnxruntime's own float32 error of onnxruntime's float32 output."""
    actual = onyxia_outputs(model, feeds)[0] if onyxia is None else onyxia
    ort32 = reference_outputs(model, feeds, "ort")[0]
    doubles = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
    ort64 = reference_outputs(_as_double(model), doubles, "ort")[0]
    _assert_near_double(actual, ort32, ort64, _PEAK_BOUND * float(np.abs(ort64).max()) + 1e-6)


def _assert_near_double(actual: np.ndarray, ort32: np.ndarray, ort64: np.ndarray, bound: float) -> None:
    """Within `bound` of onnxruntime's float64 result, and within `bound` plus onnxruntime's own float32
    error (measured on these inputs) of its float32 result."""
    assert_close(actual.astype(np.float64), ort64, "vs float64", tolerance=(0.0, bound))
    own = float(np.abs(ort32.astype(np.float64) - ort64).max())
    assert_close(actual, ort32, "vs onnxruntime float32", tolerance=(0.0, bound + own))


def _as_double(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its float32 inputs, initializers and outputs in float64 (onnxruntime's double kernels)."""
    double = onnx.ModelProto()
    double.CopyFrom(model)
    for value in [*double.graph.input, *double.graph.output]:
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.DOUBLE
    for i, init in enumerate(double.graph.initializer):
        array = onnx.numpy_helper.to_array(init)
        if array.dtype == np.float32:
            double.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(array.astype(np.float64), init.name))
    return double
