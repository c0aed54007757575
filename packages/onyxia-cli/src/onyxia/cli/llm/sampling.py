"""Choosing the next token from one row of logits: greedy, or temperature / top-k / top-p sampling
with a repetition penalty, seeded for reproducibility (the same order of operations as transformers).

Greedy and plain temperature / top-k sampling run on the GPU (com.onyxia SampleToken, fed
`gpu_params`): the token never visits the host before the next step, so those steps pipeline
(`llm/pipelined.py`). Top-p and the repetition penalty need the sorted distribution and the history:
`sample_token` draws them on the host from the logits row."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import InputError

__all__ = ["SamplingParams", "gpu_params", "gpu_rows", "on_gpu", "sample_token"]


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0: greedy
    top_k: int = 0  # 0: off
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0 and self.repetition_penalty == 1.0

    def validate(self) -> None:
        """Raise `InputError` naming each parameter out of range (the CLI's parser checks the same)."""
        problems = [
            f"{name} {value!r} (expected {expected})"
            for name, value, ok, expected in (
                ("temperature", self.temperature, _finite(self.temperature) and self.temperature >= 0, "a number >= 0"),
                ("top_k", self.top_k, _integer(self.top_k) and self.top_k >= 0, "an integer >= 0"),
                ("top_p", self.top_p, _finite(self.top_p) and 0.0 < self.top_p <= 1.0, "0 < p <= 1"),
                (
                    "repetition_penalty",
                    self.repetition_penalty,
                    _finite(self.repetition_penalty) and self.repetition_penalty > 0,
                    "a number > 0",
                ),
                ("seed", self.seed, self.seed is None or (_integer(self.seed) and self.seed >= 0), "an integer >= 0"),
            )
            if not ok
        ]
        if problems:
            raise InputError(f"sampling parameters out of range: {'; '.join(problems)}")


def on_gpu(params: SamplingParams) -> bool:
    """Whether SampleToken draws this token on the GPU (everything but top-p and repetition penalties)."""
    return params.top_p >= 1.0 and params.repetition_penalty == 1.0


_MAX_TOP_K = 2**24  # float32 holds every integer up to here; a larger k keeps the whole vocabulary anyway
_BELOW_ONE = float(np.nextafter(np.float32(1.0), np.float32(0.0)))


def gpu_params(params: SamplingParams, rng: np.random.Generator) -> np.ndarray:
    """SampleToken's params for one step: (temperature, top_k, u), u drawn from `rng` (one draw per sampled
    step, as `sample_token`'s `rng.choice` takes one; none when greedy), below 1 also in float32."""
    if params.temperature <= 0.0:
        return np.zeros(3, np.float32)
    u = min(float(np.float32(rng.random())), _BELOW_ONE)
    return np.array([params.temperature, min(params.top_k, _MAX_TOP_K), u], np.float32)


def gpu_rows(draws: Iterable[tuple[SamplingParams, np.random.Generator]]) -> np.ndarray:
    """SampleToken's params for a batch, one `gpu_params` row per (params, rng) in row order; a row the host
    samples (top-p, repetition penalty) gets a greedy row and takes no draw. Zeros are left as they are:
    a greedy row draws nothing, so a batch of greedy rows costs one array."""
    draws = list(draws)
    rows = np.zeros((len(draws), 3), np.float32)
    for b, (params, rng) in enumerate(draws):
        if params.temperature > 0.0 and on_gpu(params):
            rows[b] = gpu_params(params, rng)
    return rows


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def sample_token(logits: np.ndarray, params: SamplingParams, history: Sequence[int], rng: np.random.Generator) -> int:
    scores = logits.astype(np.float64).reshape(-1)
    if params.repetition_penalty != 1.0 and history:
        seen = np.unique(np.asarray(history, dtype=np.int64))
        picked = scores[seen]
        scores[seen] = np.where(picked < 0, picked * params.repetition_penalty, picked / params.repetition_penalty)
    if params.temperature <= 0.0:
        return int(np.argmax(scores))
    scores = scores / params.temperature
    if params.top_k and params.top_k < scores.size:
        kth = np.partition(scores, -params.top_k)[-params.top_k]
        scores = np.where(scores < kth, -np.inf, scores)
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    if params.top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        keep = cumulative - probs[order] < params.top_p  # always keeps the most likely token
        mask = np.zeros_like(probs, dtype=bool)
        mask[order[keep]] = True
        probs = np.where(mask, probs, 0.0)
        probs /= probs.sum()
    return int(rng.choice(probs.size, p=probs))
