"""Log-probabilities of sampled tokens (`Stream(logprobs=k)`) against log_softmax of onnxruntime's logits.

Tolerance: the fixtures' logits agree with onnxruntime's within `tolerance` (1e-4, `llm_cases.FIXTURES`, checked by
test_llm_fixtures); log_softmax(x)[t] = x[t] - logsumexp(x) moves by at most |dx[t]| + max|dx| <= 2 * tolerance,
plus float32 rounding of the GPU's log-sum-exp (1e-5 covers 262144 terms). The top-k ids must be onnxruntime's
order except where two entries lie within that tolerance (an order flip there is within the logits' own
disagreement). One batch mixes a greedy row (k = 20), a GPU-sampled row (k = 5), a host-sampled row (top-p:
computed from its logits row on the host, k = 2) and a row that does not ask."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from llm_cases import DATA, FIXTURES, expected
from logprob_cases import batched_session, log_softmax, ort_logits

from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.logprobs import LOGPROB_COUNT, TokenLogprob
from onyxia.cli.llm.sampling import SamplingParams
from onyxia.core import InputError

CASES = ["llama-tiny-optimum", "qwen2-tiny-genai/fp32"]  # optimum's Concat cache, genai's GroupQueryAttention


def _tolerance(directory: str) -> float:
    logits_tolerance = next(f.tolerance for f in FIXTURES if f.directory == directory and f.precision is None)
    return 2 * logits_tolerance + 1e-5


def _check(directory: str, stream: Stream, tolerance: float) -> float:
    """Each token's log-probability and top entries against onnxruntime's; the largest difference."""
    reference = log_softmax(ort_logits(DATA / directory, stream.prompt + stream.tokens[:-1]))[len(stream.prompt) - 1 :]
    assert len(stream.token_logprobs) == len(stream.tokens)
    worst = 0.0
    for step, (token, item) in enumerate(zip(stream.tokens, stream.token_logprobs)):
        row = reference[step]
        assert isinstance(item, TokenLogprob) and item.token_id == token
        worst = max(worst, abs(item.logprob - row[token]))
        k = stream.logprobs or 0
        order = np.argsort(-row, kind="stable")[:k]
        ids = [i for i, _ in item.top]
        assert len(ids) == k
        np.testing.assert_allclose([v for _, v in item.top], row[ids], atol=tolerance, rtol=0)
        for mine, theirs in zip(ids, order):  # the same ids, or a swap of entries within the tolerance
            assert mine == theirs or abs(row[mine] - row[theirs]) <= tolerance, (step, ids, order)
        worst = max([worst, *(abs(v - row[i]) for i, v in item.top)])
    assert worst <= tolerance
    return worst


@pytest.mark.parametrize("directory", CASES)
def test_logprobs_equal_log_softmax_of_onnxruntime_logits(directory: str) -> None:
    llm = batched_session(directory)
    prompt = expected(directory, "expected.json")["prompts"][0]["prompt_ids"]
    batch = llm.batch()
    asking = [
        batch.add(Stream(prompt, 10, logprobs=20)),
        batch.add(Stream(prompt[:6], 10, SamplingParams(temperature=0.9, seed=5), logprobs=5)),
        batch.add(Stream(prompt[:9], 10, SamplingParams(temperature=0.8, top_p=0.9, seed=6), logprobs=2)),
    ]
    silent = batch.add(Stream(prompt[:4], 10, SamplingParams(temperature=0.7, seed=7)))
    batch.run()
    tolerance = _tolerance(directory)
    worst = max(_check(directory, stream, tolerance) for stream in asking)
    print(f"{directory}: largest logprob difference from onnxruntime {worst:.2e} (bar {tolerance:.1e})")
    assert asking[0].tokens == expected(directory, "expected.json")["prompts"][0]["greedy_ids"][:10]
    assert silent.token_logprobs == [] and len(silent.tokens) == 10


def test_only_steps_with_an_asking_row_compute_logprobs() -> None:
    """The TokenLogprobs dispatch is left out (its row count 0) unless a row of the step asks."""
    llm = batched_session(CASES[0])
    batch = llm.batch()
    stream = batch.add(Stream([5, 6, 7], 3, logprobs=0))
    batch.step()  # the prefill: one asking row
    assert llm.executor.dims[LOGPROB_COUNT] == 1
    assert ("onyxia/logprobs", "TokenLogprobs") in llm.executor.live_dispatches()
    batch.run()
    assert llm.executor.dims[LOGPROB_COUNT] == 0
    assert all(op != "TokenLogprobs" for _, op in llm.executor.live_dispatches())
    assert [t.top for t in stream.token_logprobs] == [()] * 3  # k = 0: the token's own value only
    plain = llm.batch()
    plain.add(Stream([5, 6, 7], 3))
    plain.step()
    assert llm.executor.dims[LOGPROB_COUNT] == 0


@pytest.mark.parametrize("bad", [21, -1, 2.0, True])
def test_a_bad_logprobs_value_is_refused_when_added(bad: Any) -> None:
    batch = batched_session(CASES[0]).batch()
    with pytest.raises(InputError, match="logprobs is .*expected None \\(off\\) or an integer 0 to 20"):
        batch.add(Stream([1, 2], 2, logprobs=bad))
