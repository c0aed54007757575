"""onnxruntime's logits for a whole token sequence, the oracle of the logprobs tests: one run without a cache (an
empty past), so position i's row is what the model predicts after ids[: i + 1]."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SLOTS", "batched_session", "log_softmax", "ort_logits"]


@cache
def _session(model: Path) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])


def ort_logits(model_dir: Path, ids: list[int]) -> np.ndarray:
    """[len(ids), vocab] float32 logits of the optimum or onnxruntime-genai export in `model_dir`."""
    session = _session(model_dir / "model.onnx")
    genai = model_dir / "genai_config.json"
    head = json.loads(genai.read_text())["model"]["decoder"]["head_size"] if genai.exists() else None
    x = np.array([ids], np.int64)
    feeds: dict[str, np.ndarray] = {}
    for spec in session.get_inputs():
        if spec.name == "input_ids":
            feeds[spec.name] = x
        elif spec.name == "attention_mask":
            feeds[spec.name] = np.ones_like(x)
        elif spec.name == "position_ids":
            feeds[spec.name] = np.arange(len(ids), dtype=np.int64)[None]
        else:  # a past cache: empty
            dims = [1, spec.shape[1], 0, spec.shape[3] if isinstance(spec.shape[3], int) else head]
            feeds[spec.name] = np.zeros(dims, np.float16 if "float16" in spec.type else np.float32)
    (logits,) = session.run(["logits"], feeds)
    return np.asarray(logits[0], np.float32)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    top = x.max(axis=-1, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(axis=-1, keepdims=True))


SLOTS = 4


@cache
def batched_session(directory: str) -> Any:
    """A `SLOTS`-slot session of a fixture (max_length 160), shared by the logprobs and parallel-sample tests."""
    from llm_cases import DATA

    from onyxia.cli.llm import LlmSession

    return LlmSession.from_pretrained(DATA / directory, None, max_length=160, slots=SLOTS)
