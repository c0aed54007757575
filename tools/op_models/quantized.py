"""The quantized files: onnxruntime.quantization run on the fp32 exports as its docs show.

Every model first goes through `quant_pre_process` (symbolic shape inference and onnxruntime's
basic graph optimizations, e.g. BatchNorm folded into Conv), the step the quantization docs put
before quantizing. Then:

- `quantize_dynamic` (QOperator, the only format it writes): MatMul -> DynamicQuantizeLinear +
  MatMulInteger + scale Mul; Conv -> ConvInteger. BERT keeps the default int8 weights; the conv net
  uses uint8 weights because onnxruntime's CPU ConvInteger takes uint8 x uint8 only.
- `quantize_static` with a `CalibrationDataReader` over seeded inputs (MinMax calibration):
  QOperator format (QLinearConv, QLinearMatMul, QLinearAdd, QLinearMul, QLinearSoftmax,
  QLinearGlobalAveragePool, QGemm, ... with uint8 activations and int8 weights, the U8S8 layout
  onnxruntime's CPU kernels favour) and QDQ format (QuantizeLinear/DequantizeLinear pairs around the
  float ops, int8 both, the documented default).

Saturation. onnxruntime's x86 U8S8 kernels without AVX-VNNI (this machine's) add pairs of u8 x s8
products in int16 (`vpmaddubsw`), which saturates: measured here, an isolated u8 x s8 MatMulInteger
of `bert_dynamic_int8` differs from the exact int32 product in 1 of 2048 outputs (by 794), a
QLinearConv of the conv net in 159 of 32768 (by up to 32 steps). The records would then hold
onnxruntime's saturated values, and depend on the generating CPU. `reduce_range` (7-bit weights)
is the remedy onnxruntime's docs give for it: pair sums stay below 2 * 255 * 64 < 32768. So the
QOperator static files use it, `bert_dynamic_int8_reduce_range` is the dynamic BERT with it (the
isolated u8 x s8 MatMulInteger comes from that one), and `bert_dynamic_int8` stays at the default
as users get it, compared as floats with the tolerance the test measures for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

__all__ = ["QUANT_CASES", "QuantCase", "quantize"]

# calibration batches drawn per model (the recorded inputs are the first)
CALIBRATION_BATCHES = 8


@dataclass(frozen=True)
class QuantCase:
    """A quantized file: which fp32 file it is made from, and the quantizer call."""

    base: str
    tool: str  # how the manifest names it
    run: Callable[[Path, Path, dict[str, np.ndarray], int], None]


class _Reader(CalibrationDataReader):  # type: ignore[misc]
    """The recorded inputs, then seeded variations of them (floats redrawn, token ids reshuffled)."""

    def __init__(self, inputs: dict[str, np.ndarray], seed: int) -> None:
        self._it = self._batches(inputs, seed)

    @staticmethod
    def _batches(inputs: dict[str, np.ndarray], seed: int) -> Iterator[dict[str, np.ndarray]]:
        rng = np.random.default_rng(seed + 100)
        yield inputs
        for _ in range(CALIBRATION_BATCHES - 1):
            yield {
                k: rng.standard_normal(v.shape).astype(v.dtype)
                if v.dtype == np.float32
                else (rng.permuted(v, axis=1) if k == "input_ids" else v)
                for k, v in inputs.items()
            }

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)


def _dynamic(
    weight_type: QuantType, reduce_range: bool = False
) -> Callable[[Path, Path, dict[str, np.ndarray], int], None]:
    def run(src: Path, dst: Path, inputs: dict[str, np.ndarray], seed: int) -> None:
        quantize_dynamic(src, dst, weight_type=weight_type, reduce_range=reduce_range)

    return run


def _static(
    fmt: QuantFormat, activation: QuantType, reduce_range: bool
) -> Callable[[Path, Path, dict[str, np.ndarray], int], None]:
    def run(src: Path, dst: Path, inputs: dict[str, np.ndarray], seed: int) -> None:
        quantize_static(
            src,
            dst,
            _Reader(inputs, seed),
            quant_format=fmt,
            activation_type=activation,
            weight_type=QuantType.QInt8,
            reduce_range=reduce_range,
        )

    return run


QUANT_CASES: dict[str, QuantCase] = {
    "bert_dynamic_int8": QuantCase("bert", "quantize_dynamic (QOperator, int8 weights)", _dynamic(QuantType.QInt8)),
    "bert_dynamic_int8_reduce_range": QuantCase(
        "bert", "quantize_dynamic (QOperator, int8 weights, reduce_range)", _dynamic(QuantType.QInt8, reduce_range=True)
    ),
    "convnet_dynamic_uint8": QuantCase(
        "convnet", "quantize_dynamic (QOperator, uint8 weights)", _dynamic(QuantType.QUInt8)
    ),
    "convnet_static_qoperator": QuantCase(
        "convnet",
        "quantize_static (QOperator, U8S8, reduce_range, MinMax)",
        _static(QuantFormat.QOperator, QuantType.QUInt8, reduce_range=True),
    ),
    "bert_static_qoperator": QuantCase(
        "bert",
        "quantize_static (QOperator, U8S8, reduce_range, MinMax)",
        _static(QuantFormat.QOperator, QuantType.QUInt8, reduce_range=True),
    ),
    "convnet_static_qdq": QuantCase(
        "convnet", "quantize_static (QDQ, S8S8, MinMax)", _static(QuantFormat.QDQ, QuantType.QInt8, reduce_range=False)
    ),
    "bert_static_qdq": QuantCase(
        "bert", "quantize_static (QDQ, S8S8, MinMax)", _static(QuantFormat.QDQ, QuantType.QInt8, reduce_range=False)
    ),
}


def quantize(case: QuantCase, fp32: Path, dst: Path, inputs: dict[str, np.ndarray], seed: int, work: Path) -> None:
    """Pre-process the fp32 file (as the docs say), then quantize it into `dst`.

    Inside `work`: both tools may leave temporary files (shape inference copies, external data) in
    the current directory. Symbolic shape inference is skipped: it gives up on the TorchScript
    BERT's dynamic Shape/Gather/Concat chains ("Incomplete symbolic shape inference"); onnx's own
    shape inference still runs."""
    work.mkdir(parents=True, exist_ok=True)
    prepped = work / f"{dst.stem}.prep.onnx"
    with contextlib.chdir(work):
        quant_pre_process(str(fp32.resolve()), str(prepped.resolve()), skip_symbolic_shape=True)
        case.run(prepped.resolve(), dst.resolve(), inputs, seed)
