"""com.onyxia SampleToken against numpy: ArgMax's answer (first index on ties) at temperature 0, and for
top-k / temperature sampling the token whose inverse-CDF interval holds u, checked at the middle of every
kept token's interval (and at its ends: u = 0, u just below 1), so each kept token is drawn exactly where
numpy's float64 CDF says and no token outside the top k ever is."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from oracle import compile_model, make_model, runtime

from onyxia.core import OnyxiaError

RNG = np.random.default_rng(23)


def _executor(logits: np.ndarray) -> Any:
    params = np.zeros(3, np.float32)
    model = make_model("SampleToken", {"logits": logits, "params": params}, domain="com.onyxia")
    return runtime().load_model(compile_model(model))


def _draw(executor: Any, logits: np.ndarray, temperature: float, top_k: int, u: float) -> np.ndarray:
    params = np.array([temperature, top_k, u], np.float32)
    result: np.ndarray = executor.run({"logits": logits, "params": params})["y0"]
    return result


def _intervals(row: np.ndarray, temperature: float, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each kept token id and its [start, end) of the CDF in vocabulary order (float64), as the host sampler
    (`onyxia.cli.llm.sampling`) computes them."""
    scores = row.astype(np.float64) / temperature
    if 0 < top_k < scores.size:
        kth = np.partition(scores, -top_k)[-top_k]
        scores = np.where(scores < kth, -np.inf, scores)
    probs = np.exp(scores - scores.max())
    cdf = np.cumsum(probs / probs.sum())
    kept = np.flatnonzero(probs > 0)
    starts = np.concatenate([[0.0], cdf[:-1]])
    return kept, np.stack([starts[kept], cdf[kept]], axis=1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_temperature_zero_is_argmax_with_first_index_on_ties(dtype: type) -> None:
    vocab = 262_144 + 7  # Gemma 3's vocabulary plus a ragged last chunk
    logits: np.ndarray = RNG.standard_normal((1, 1, vocab)).astype(dtype)
    top = int(np.argmax(logits))
    logits[0, 0, vocab - 3] = logits[0, 0, top]  # a later tie: the first index wins
    executor = _executor(logits)
    token = _draw(executor, logits, 0.0, 0, 0.5)
    assert token.shape == (1, 1) and token.dtype == np.int64
    assert int(token[0, 0]) == top


@pytest.mark.parametrize(("temperature", "top_k"), [(0.7, 8), (1.0, 1), (1.3, 0), (0.9, 5)])
def test_draws_follow_the_inverse_cdf(temperature: float, top_k: int) -> None:
    vocab = 3_001
    logits = (RNG.standard_normal((1, 1, vocab)) * 2).astype(np.float32)
    logits[0, 0, RNG.choice(vocab, 6, replace=False)] += 9.0  # a few likely tokens, wide intervals
    if top_k == 5:
        logits[0, 0, 10:13] = np.sort(logits[0, 0])[-5]  # ties at the 5th score: all of them kept
    executor = _executor(logits)
    kept, spans = _intervals(logits[0, 0], temperature, top_k)
    checked = 0
    for token, (start, end) in zip(kept, spans):
        if end - start < 1e-4:  # too narrow for f32 sums to place exactly
            continue
        drawn = int(_draw(executor, logits, temperature, top_k, float((start + end) / 2))[0, 0])
        assert drawn == token, f"u in the middle of token {token}'s interval [{start}, {end}) drew {drawn}"
        checked += 1
    assert checked >= min(len(kept), 3)
    first, last = int(kept[0]), int(kept[-1])
    assert int(_draw(executor, logits, temperature, top_k, 0.0)[0, 0]) == first
    assert int(_draw(executor, logits, temperature, top_k, float(np.nextafter(np.float32(1), 0)))[0, 0]) == last
    if top_k:
        draws = {int(_draw(executor, logits, temperature, top_k, u)[0, 0]) for u in np.linspace(0, 0.999, 41)}
        assert draws <= set(kept.tolist()) and len(kept) >= top_k


def test_every_row_draws_on_its_own() -> None:
    logits = RNG.standard_normal((2, 3, 500)).astype(np.float32)
    executor = _executor(logits)
    greedy = _draw(executor, logits, 0.0, 0, 0.0)
    np.testing.assert_array_equal(greedy, np.argmax(logits, axis=-1))
    assert greedy.shape == (2, 3)
    one = _draw(executor, logits, 1.0, 1, 0.73)  # top-1 sampling is greedy whatever u is
    np.testing.assert_array_equal(one, np.argmax(logits, axis=-1))


def test_a_triple_per_row_samples_each_row_by_its_own_params() -> None:
    """A batched decode step: row 0 greedy, row 1 top-1 (greedy whatever u), row 2 a draw checked against the
    CDF intervals, row 3 greedy again after a sampling row (no state leaks between rows)."""
    logits = RNG.standard_normal((4, 1, 300)).astype(np.float32)
    params = np.array([[0.0, 0, 0.0], [1.0, 1, 0.9], [0.8, 6, 0.5], [0.0, 0, 0.99]], np.float32)
    model = make_model("SampleToken", {"logits": logits, "params": params}, domain="com.onyxia")
    executor = runtime().load_model(compile_model(model))
    ids = executor.run({"logits": logits, "params": params})["y0"].reshape(-1)
    best = np.argmax(logits.reshape(4, -1), axis=-1)
    assert [ids[0], ids[1], ids[3]] == [best[0], best[1], best[3]]
    kept, spans = _intervals(logits[2, 0], 0.8, 6)
    assert ids[2] == kept[np.searchsorted(spans[:, 1], 0.5, side="right")]


def test_params_of_the_wrong_shape_name_the_node() -> None:
    model = make_model(
        "SampleToken", {"logits": np.zeros((1, 8), np.float32), "params": np.zeros(2, np.float32)}, domain="com.onyxia"
    )
    with pytest.raises(OnyxiaError, match=r"params \(input 1\).*expected \[3\]"):
        compile_model(model)
