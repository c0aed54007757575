"""`sample_token`'s OpenAI parameters against the formula written out here: a logit bias added to the raw row,
presence and frequency penalties over the tokens generated so far (not the prompt), the repetition penalty over
everything the sequence holds; each sends the row to the host (`on_gpu`) and is range-checked by name; and a
session's single-stream and batch paths generate what that formula picks from the model's own logits."""

from __future__ import annotations

import numpy as np
import pytest
from llm_cases import session

from onyxia.cli.llm import SamplingParams
from onyxia.cli.llm.batch import Stream
from onyxia.cli.llm.sampling import on_gpu, sample_token
from onyxia.core import InputError

RNG = np.random.default_rng(5)


def _openai(logits: np.ndarray, generated: list[int], presence: float, frequency: float, bias: dict) -> np.ndarray:
    """OpenAI's definition: mu[j] - c[j] * frequency - (c[j] > 0) * presence, plus the bias."""
    scores = logits.astype(np.float64).copy()
    for token, value in bias.items():
        scores[token] += value
    counts = np.bincount(np.asarray(generated, np.int64), minlength=scores.size)
    return scores - counts * frequency - (counts > 0) * presence


@pytest.mark.parametrize(("presence", "frequency"), [(0.0, 0.7), (1.3, 0.0), (0.4, 1.9), (-1.0, -0.5)])
def test_greedy_takes_the_argmax_of_openais_penalised_row(presence: float, frequency: float) -> None:
    for _ in range(20):
        logits = RNG.standard_normal(64).astype(np.float32)
        generated = RNG.integers(0, 8, 12).tolist()  # repeats among the likely ids make the counts matter
        bias = {int(RNG.integers(64)): float(RNG.uniform(-3, 3))}
        params = SamplingParams(presence_penalty=presence, frequency_penalty=frequency, logit_bias=tuple(bias.items()))
        expected = int(np.argmax(_openai(logits, generated, presence, frequency, bias)))
        assert sample_token(logits, params, [60, 61, *generated], RNG, generated) == expected


def test_the_penalties_count_generated_tokens_only() -> None:
    logits = np.array([3.0, 2.9, 0.0], np.float32)
    params = SamplingParams(presence_penalty=0.5)
    assert sample_token(logits, params, history=[0, 0, 0], rng=RNG, generated=[]) == 0  # the prompt's 0s count not
    assert sample_token(logits, params, history=[0, 0, 0], rng=RNG, generated=[0]) == 1
    frequency = SamplingParams(frequency_penalty=0.06)
    assert sample_token(logits, frequency, [], RNG, generated=[0]) == 0  # 3.0 - 0.06 > 2.9
    assert sample_token(logits, frequency, [], RNG, generated=[0, 0]) == 1  # 3.0 - 0.12 < 2.9


def test_a_logit_bias_of_100_forces_its_token_and_minus_100_bans_it() -> None:
    logits = RNG.standard_normal(50).astype(np.float32)
    assert sample_token(logits, SamplingParams(logit_bias=((17, 100.0),)), [], RNG) == 17
    best = int(np.argmax(logits))
    assert sample_token(logits, SamplingParams(logit_bias=((best, -100.0),)), [], RNG) != best
    sampled = SamplingParams(temperature=1.0, logit_bias=((best, -100.0),), seed=3)
    assert best not in {sample_token(logits, sampled, [], np.random.default_rng(i)) for i in range(200)}


def test_min_p_draws_only_tokens_at_least_min_p_times_the_likeliest() -> None:
    logits = np.log(np.array([0.5, 0.3, 0.12, 0.08], np.float32))
    params = SamplingParams(temperature=1.0, min_p=0.2)  # 0.2 x 0.5 = 0.1: 0.08 goes
    drawn = {sample_token(logits, params, [], np.random.default_rng(i)) for i in range(400)}
    assert drawn == {0, 1, 2}
    assert {sample_token(logits, SamplingParams(temperature=1.0, min_p=1.0), [], RNG) for _ in range(50)} == {0}


def test_each_parameter_sends_the_row_to_the_host() -> None:
    assert on_gpu(SamplingParams(temperature=0.7, top_k=5))
    for params in (
        SamplingParams(presence_penalty=0.1),
        SamplingParams(frequency_penalty=-0.1),
        SamplingParams(logit_bias=((3, 1.0),)),
        SamplingParams(temperature=0.5, min_p=0.1),
    ):
        assert not on_gpu(params)


@pytest.mark.parametrize(
    ("params", "named"),
    [
        (SamplingParams(presence_penalty=2.5), "presence_penalty"),
        (SamplingParams(frequency_penalty=float("nan")), "frequency_penalty"),
        (SamplingParams(logit_bias=((3, 101.0),)), "logit_bias"),
        (SamplingParams(logit_bias=((-1, 1.0),)), "logit_bias"),
        (SamplingParams(min_p=1.5), "min_p"),
    ],
)
def test_out_of_range_values_are_named(params: SamplingParams, named: str) -> None:
    with pytest.raises(InputError, match=named):
        params.validate()


def test_both_generation_paths_pick_the_formulas_token_from_the_models_logits() -> None:
    llm = session("gemma3-tiny-optimum", None)
    prompt, steps = [2, 105, 9, 44, 9, 44], 12
    bias = {44: 1.5, 9: -0.5}
    params = SamplingParams(presence_penalty=0.8, frequency_penalty=0.6, logit_bias=tuple(bias.items()))
    llm.reset()
    expected, ids = [], prompt
    for _ in range(steps):  # the oracle: the session's raw logits, one position at a time, and the formula
        row = llm.next_token_logits(ids)
        expected.append(int(np.argmax(_openai(row, expected, 0.8, 0.6, bias))))
        ids = [expected[-1]]
    llm.reset()
    assert list(llm.generate_ids(prompt, steps, params)) == expected
    llm.reset()
    batch = llm.batch()
    stream = batch.add(Stream(prompt, steps, params))
    batch.run()
    assert stream.tokens == expected
    llm.reset()
    plain = list(llm.generate_ids(prompt, steps))
    assert plain != expected  # the parameters changed the answer, so the comparison above tested them


def test_a_logit_bias_outside_the_vocabulary_is_refused_when_the_request_is_made() -> None:
    llm = session("gemma3-tiny-optimum", None)
    params = SamplingParams(logit_bias=((llm.vocab_size, 1.0),))
    with pytest.raises(InputError, match="logit_bias"):
        next(llm.generate_ids([2, 5], 4, params))
    with pytest.raises(InputError, match="logit_bias"):
        llm.batch().add(Stream([2, 5], 4, params))
