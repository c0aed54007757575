"""The embedding fixtures (tools/embedding_fixture), their expected outputs, and one loaded model of each per process.

`expected.npz` holds sentence-transformers' own pooling (and Normalize) of onnxruntime's hidden states for the
texts in `texts.json`, made by the generator; `ort_hidden` reruns onnxruntime here on the same graph so a test
can show the committed numbers still follow from this machine's onnxruntime.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np

from onyxia.cli.embeddings import EmbeddingModel

__all__ = ["DATA", "MEAN", "CLS", "assert_same_vectors", "expected", "model", "ort_hidden", "texts", "token_counts"]

DATA = Path(__file__).parent / "data"
MEAN = "minilm-mean-tiny"  # mean pooling + Normalize, matryoshka_dimensions [8, 16]
CLS = "bert-cls-tiny"  # CLS pooling, no Normalize, no Matryoshka
MIN_COSINE = 0.99999


@cache
def model(name: str) -> EmbeddingModel:
    return EmbeddingModel.from_pretrained(DATA / name)


def texts(name: str) -> list[str]:
    found: list[str] = json.loads((DATA / name / "texts.json").read_text(encoding="utf-8"))["texts"]
    return found


def token_counts(name: str) -> list[int]:
    found: list[int] = json.loads((DATA / name / "texts.json").read_text(encoding="utf-8"))["tokens"]
    return found


def expected(name: str, key: str = "embeddings") -> np.ndarray:
    with np.load(DATA / name / "expected.npz") as arrays:
        return np.asarray(arrays[key])


def expected_keys(name: str) -> list[str]:
    with np.load(DATA / name / "expected.npz") as arrays:
        return sorted(arrays.files)


def ort_hidden(name: str, ids: list[list[int]]) -> np.ndarray:
    """onnxruntime's (CPU) last_hidden_state for `ids` right-padded with 0 under the attention mask."""
    import onnxruntime

    longest = max(len(t) for t in ids)
    padded = np.array([t + [0] * (longest - len(t)) for t in ids], np.int64)
    mask = np.array([[1] * len(t) + [0] * (longest - len(t)) for t in ids], np.int64)
    session = onnxruntime.InferenceSession(str(DATA / name / "model.onnx"), providers=["CPUExecutionProvider"])
    feeds = {"input_ids": padded, "attention_mask": mask, "token_type_ids": np.zeros_like(padded)}
    (hidden,) = session.run(["last_hidden_state"], feeds)
    return np.asarray(hidden)


def assert_same_vectors(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Cosine >= MIN_COSINE per row and equal norms within 1e-4 relative; the message names the worst row
    and the largest absolute difference."""
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    norms = np.linalg.norm(got64, axis=1) * np.linalg.norm(want64, axis=1)
    cosine = np.sum(got64 * want64, axis=1) / np.maximum(norms, 1e-30)
    worst = int(cosine.argmin())
    diff = float(np.abs(got64 - want64).max())
    assert cosine[worst] >= MIN_COSINE, f"{what}: row {worst} cosine {cosine[worst]:.7f}; max abs diff {diff:.3g}"
    ratio = np.linalg.norm(got64, axis=1) / np.maximum(np.linalg.norm(want64, axis=1), 1e-30)
    assert np.all(np.abs(ratio - 1) < 1e-4), f"{what}: norms differ (ratios {ratio}); max abs diff {diff:.3g}"
