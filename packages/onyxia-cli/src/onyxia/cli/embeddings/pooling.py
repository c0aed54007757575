"""sentence-transformers' pooling modes and its Normalize, on the host, one row per mode.

Each takes the encoder's hidden states [batch, seq, dim] (float32) and the attention mask [batch, seq]
(1 for a token, 0 for padding) and returns [batch, dim], exactly as `sentence_transformers`' Pooling does
on a padded batch (its clamps included), so a text's vector does not depend on the batch it was padded in.
Pooling runs on the host: it reads back [batch, seq, dim] floats that the GPU already produced, a few
kilobytes per text, and keeps every mode a numpy one-liner checked against sentence-transformers itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["POOLINGS", "Pool", "normalize", "pool"]

Pool = Callable[[np.ndarray, np.ndarray], np.ndarray]

_EPS = np.float32(1e-9)  # sentence-transformers' clamp on token counts and weight sums


def _f32(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def _cls(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The first unmasked token (index 0 under right padding, the first real one under left padding)."""
    first = mask.argmax(axis=1)
    return _f32(hidden[np.arange(hidden.shape[0]), first])


def _max(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return _f32(np.where(mask[..., None] > 0, hidden, -np.inf).max(axis=1))


def _masked_sum(hidden: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    weights = mask[..., None].astype(np.float32)
    return (hidden * weights).sum(axis=1), np.maximum(weights.sum(axis=1), _EPS)


def _mean(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    total, count = _masked_sum(hidden, mask)
    return _f32(total / count)


def _mean_sqrt_len(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    total, count = _masked_sum(hidden, mask)
    return _f32(total / np.sqrt(count))


def _weighted_mean(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Position i (from 1) weighs i: later tokens count more (SGPT's pooling for causal encoders)."""
    positions = np.arange(1, hidden.shape[1] + 1, dtype=np.float32)
    weights = (mask.astype(np.float32) * positions)[..., None]
    return _f32((hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), _EPS))


def _last_token(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The last unmasked token (decoder-style embedders: Qwen3-Embedding, e5-mistral); an all-padding row
    takes the last position, zeroed by the mask, as sentence-transformers does."""
    seq = hidden.shape[1]
    flipped = mask[:, ::-1]
    from_end = np.where(flipped.max(axis=1) == 0, seq - 1, flipped.argmax(axis=1))
    index = seq - from_end - 1
    rows = np.arange(hidden.shape[0])
    return _f32(hidden[rows, index] * mask[rows, index][:, None])


POOLINGS: dict[str, Pool] = {
    "cls": _cls,
    "max": _max,
    "mean": _mean,
    "mean_sqrt_len_tokens": _mean_sqrt_len,
    "weightedmean": _weighted_mean,
    "lasttoken": _last_token,
}


def pool(modes: Sequence[str], hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The modes' vectors concatenated in `modes`' order (sentence-transformers' rule for several modes)."""
    hidden = np.asarray(hidden, dtype=np.float32)
    parts = [POOLINGS[mode](hidden, mask) for mode in modes]
    return _f32(np.concatenate(parts, axis=1))


def normalize(vectors: np.ndarray) -> np.ndarray:
    """torch's `F.normalize(p=2, dim=1)`, which sentence-transformers' Normalize calls: a zero row stays zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return _f32(vectors / np.maximum(norms, np.float32(1e-12)))
