"""Choosing the next token from one row of logits: greedy, or temperature / top-k / top-p sampling
with a repetition penalty, seeded for reproducibility (the same order of operations as transformers), and
OpenAI's logit bias and presence / frequency penalties.

Greedy and plain temperature / top-k sampling run on the GPU (com.onyxia SampleToken, fed
`gpu_params`): the token never visits the host before the next step, so those steps pipeline
(`llm/pipelined.py`). Top-p, the penalties and a logit bias need the sorted distribution, the history or a
row edited per request: `sample_token` draws them on the host from the logits row, in vLLM's order: the bias
added, the repetition penalty over every token the sequence holds (prompt included, as transformers), the
presence and frequency penalties over the tokens generated so far (OpenAI's definition: logit -= frequency
x count + presence x (count > 0)), then temperature, top-k, top-p and min-p (vLLM's and llama.cpp's: tokens
less likely than min_p times the likeliest are dropped)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import InputError

__all__ = ["SamplingParams", "gpu_params", "gpu_rows", "on_gpu", "sample_token"]


@dataclass(frozen=True)
class SamplingParams:
    """How one request draws its tokens; the defaults are greedy decoding.

    `temperature` (0: greedy), `top_k` (0: off), `top_p` and `repetition_penalty` (1: off) as transformers applies
    them; `seed` makes sampling reproducible; OpenAI's `presence_penalty` and `frequency_penalty` (-2 .. 2, over
    the tokens generated so far) and `logit_bias` ((token id, bias -100 .. 100) pairs); vLLM's and llama.cpp's
    `min_p` (0 .. 1). `validate()` names any value out of range."""

    temperature: float = 0.0  # 0: greedy
    top_k: int = 0  # 0: off
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    presence_penalty: float = 0.0  # OpenAI's, -2 .. 2: subtracted once from each token generated so far
    frequency_penalty: float = 0.0  # OpenAI's, -2 .. 2: subtracted per occurrence among the generated tokens
    logit_bias: tuple[tuple[int, float], ...] = ()  # OpenAI's (token id, -100 .. 100) pairs, added to the logits
    min_p: float = 0.0  # vLLM's / llama.cpp's, 0 .. 1: drop tokens less likely than min_p x the likeliest's

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
                ("min_p", self.min_p, _finite(self.min_p) and 0.0 <= self.min_p <= 1.0, "0 <= p <= 1"),
                ("presence_penalty", self.presence_penalty, _within(self.presence_penalty, 2.0), "-2 <= x <= 2"),
                ("frequency_penalty", self.frequency_penalty, _within(self.frequency_penalty, 2.0), "-2 <= x <= 2"),
                (
                    "logit_bias",
                    self.logit_bias,
                    all(_integer(t) and t >= 0 and _within(b, 100.0) for t, b in self.logit_bias),
                    "(token id >= 0, -100 <= bias <= 100) pairs",
                ),
            )
            if not ok
        ]
        if problems:
            raise InputError(f"sampling parameters out of range: {'; '.join(problems)}")


def on_gpu(params: SamplingParams) -> bool:
    """Whether SampleToken draws this token on the GPU (everything but top-p, min-p, the penalties and a logit
    bias)."""
    return (
        params.top_p >= 1.0
        and params.min_p == 0.0
        and params.repetition_penalty == 1.0
        and params.presence_penalty == 0.0
        and params.frequency_penalty == 0.0
        and not params.logit_bias
    )


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


def _within(value: object, bound: float) -> bool:
    return _finite(value) and -bound <= value <= bound  # type: ignore[operator]


def _integer(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def sample_token(
    logits: np.ndarray,
    params: SamplingParams,
    history: Sequence[int],
    rng: np.random.Generator,
    generated: Sequence[int] = (),
) -> int:
    """The next token from one row of logits; `history` is every token the sequence holds (the repetition
    penalty's), `generated` the ones this request produced so far (the presence and frequency penalties')."""
    scores = logits.astype(np.float64).reshape(-1)
    for token, bias in params.logit_bias:
        scores[token] += bias
    if params.repetition_penalty != 1.0 and history:
        seen = np.unique(np.asarray(history, dtype=np.int64))
        picked = scores[seen]
        scores[seen] = np.where(picked < 0, picked * params.repetition_penalty, picked / params.repetition_penalty)
    if (params.presence_penalty or params.frequency_penalty) and generated:
        counts = Counter(generated)
        ids = np.fromiter(counts, np.int64, len(counts))
        scores[ids] -= params.frequency_penalty * np.fromiter(counts.values(), np.float64, len(counts))
        scores[ids] -= params.presence_penalty
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
    if params.min_p > 0.0:
        probs = np.where(probs >= params.min_p * probs.max(), probs, 0.0)  # always keeps the most likely token
        probs /= probs.sum()
    return int(rng.choice(probs.size, p=probs))
