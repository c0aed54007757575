"""com.onyxia SampleToken against numpy: ArgMax's answer (first index on ties) at temperature 0, and for
top-k / temperature sampling the token whose inverse-CDF interval holds u, checked at the middle of every
kept token's interval (and at its ends: u = 0, u just below 1), so each kept token is drawn exactly where
numpy's float64 CDF says and no token outside the top k ever is."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from oracle import compile_model, make_model, runtime

from onyxia.core import OnyxiaError
from onyxia.core.adapter_facts import AdapterFacts, target_adapter

RNG = np.random.default_rng(23)


def _executor(logits: np.ndarray, gpu: bool = False) -> Any:
    """`gpu`: planned as for a GPU (256 invocations per row instead of lavapipe's 64), run here on lavapipe."""
    params = np.zeros(3, np.float32)
    model = make_model("SampleToken", {"logits": logits, "params": params}, domain="com.onyxia")
    facts = AdapterFacts(cpu=False, subgroups=True, subgroup_min_size=32, subgroup_max_size=32) if gpu else None
    with target_adapter(facts) if facts else contextlib.nullcontext():
        plan = compile_model(model)
    assert f"@workgroup_size({256 if gpu else 64})" in plan.shaders[-1].source
    return runtime().load_model(plan)


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


@pytest.mark.parametrize(("dtype", "gpu"), [(np.float32, False), (np.float16, False), (np.float32, True)])
def test_temperature_zero_is_argmax_with_first_index_on_ties(dtype: type, gpu: bool) -> None:
    vocab = 262_144 + 7  # Gemma 3's vocabulary plus a ragged last chunk
    logits: np.ndarray = RNG.standard_normal((1, 1, vocab)).astype(dtype)
    top = int(np.argmax(logits))
    logits[0, 0, vocab - 3] = logits[0, 0, top]  # a later tie: the first index wins
    executor = _executor(logits, gpu)
    token = _draw(executor, logits, 0.0, 0, 0.5)
    assert token.shape == (1, 1) and token.dtype == np.int64
    assert int(token[0, 0]) == top


@pytest.mark.parametrize(
    ("temperature", "top_k", "gpu"),
    [(0.7, 8, False), (1.0, 1, False), (1.3, 0, False), (0.9, 5, False), (1.3, 0, True)],
)
def test_draws_follow_the_inverse_cdf(temperature: float, top_k: int, gpu: bool) -> None:
    vocab = 3_001
    logits = (RNG.standard_normal((1, 1, vocab)) * 2).astype(np.float32)
    logits[0, 0, RNG.choice(vocab, 6, replace=False)] += 9.0  # a few likely tokens, wide intervals
    if top_k == 5:
        logits[0, 0, 10:13] = np.sort(logits[0, 0])[-5]  # ties at the 5th score: all of them kept
    executor = _executor(logits, gpu)
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


# ----- the allowed-token bitmask (grammar-constrained decoding) -------------------------------------------
def _packed(allowed: np.ndarray, words: int) -> np.ndarray:
    """llguidance's layout: bit j % 32 of int32 word j / 32 allows id j."""
    bits = np.zeros((allowed.shape[0], words * 32), bool)
    bits[:, : allowed.shape[1]] = allowed
    packed = np.packbits(bits.reshape(allowed.shape[0], words, 32)[:, :, ::-1], axis=-1)  # big-endian bytes
    return packed.view(">u4").astype(np.uint32).view(np.int32).reshape(allowed.shape[0], words)


def _masked(logits: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """The reference: disallowed logits set to -inf (as `llguidance.numpy.apply_token_bitmask_inplace` does)."""
    return np.where(allowed[:, None, :], logits, -np.inf).astype(np.float32)


@pytest.fixture(scope="module")
def masked_batch() -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """Four batch rows of a 1,000-id vocabulary padded to 1,027 logits (a padded head: the words cover the
    padding, whose ids are never allowed); row 3 allows every id, as an unconstrained row does."""
    vocab = 1_027
    logits = (RNG.standard_normal((4, 1, vocab)) * 2).astype(np.float32)
    allowed = RNG.random((4, vocab)) < 0.05
    allowed[:, 1_000:] = False
    allowed[0, :] = False
    allowed[0, [5, 600, 999]] = True  # a choice among three ids
    allowed[3, :] = True
    mask = _packed(allowed, (vocab + 31) // 32)
    params = np.zeros((4, 3), np.float32)
    model = make_model("SampleToken", {"logits": logits, "params": params, "mask": mask}, domain="com.onyxia")
    return runtime().load_model(compile_model(model)), logits, allowed, mask


def test_packing_matches_llguidance() -> None:
    from llguidance.numpy import apply_token_bitmask_inplace

    logits = RNG.standard_normal((2, 70)).astype(np.float32)
    allowed = RNG.random((2, 70)) < 0.5
    theirs = logits.copy()
    apply_token_bitmask_inplace(theirs, _packed(allowed, 3))
    np.testing.assert_array_equal(theirs, _masked(logits[:, None, :], allowed)[:, 0])


def test_greedy_draws_the_argmax_of_the_masked_logits(masked_batch: tuple[Any, ...]) -> None:
    executor, logits, allowed, mask = masked_batch
    params = np.zeros((4, 3), np.float32)
    ids = executor.run({"logits": logits, "params": params, "mask": mask})["y0"].reshape(-1)
    np.testing.assert_array_equal(ids, np.argmax(_masked(logits, allowed), axis=-1).reshape(-1))
    assert ids[3] == np.argmax(logits[3])  # all ones: as unmasked


@pytest.mark.parametrize(("temperature", "top_k"), [(1.0, 0), (0.8, 4)])
def test_draws_follow_the_masked_inverse_cdf(masked_batch: tuple[Any, ...], temperature: float, top_k: int) -> None:
    """Every row at u in the middle of each kept token's interval of the masked distribution: the drawn id is
    that token (top-k ranks only allowed ids), and no disallowed id is ever drawn."""
    executor, logits, allowed, mask = masked_batch
    reference = _masked(logits, allowed)
    for row in range(4):
        kept, spans = _intervals(reference[row, 0], temperature, top_k)
        assert allowed[row, kept].all()
        for token, (start, end) in list(zip(kept, spans))[:6]:
            if end - start < 1e-4:
                continue
            params = np.tile(np.array([temperature, top_k, 0.0], np.float32), (4, 1))
            params[row, 2] = (start + end) / 2
            ids = executor.run({"logits": logits, "params": params, "mask": mask})["y0"].reshape(-1)
            assert ids[row] == token, f"row {row}: u in token {token}'s interval [{start}, {end}) drew {ids[row]}"
            assert all(allowed[b, ids[b]] for b in range(4))


def test_a_mask_that_allows_nothing_gives_minus_one(masked_batch: tuple[Any, ...]) -> None:
    executor, logits, _, mask = masked_batch
    empty = mask.copy()
    empty[1] = 0
    ids = executor.run({"logits": logits, "params": np.zeros((4, 3), np.float32), "mask": empty})["y0"].reshape(-1)
    assert ids[1] == -1


def test_a_mask_of_the_wrong_width_names_the_node() -> None:
    inputs = {"logits": np.zeros((1, 1, 64), np.float32), "params": np.zeros(3, np.float32)}
    model = make_model("SampleToken", {**inputs, "mask": np.zeros((1, 3), np.int32)}, domain="com.onyxia")
    with pytest.raises(OnyxiaError, match=r"mask \(input 2\).*expected \[1, 2\]"):
        compile_model(model)
