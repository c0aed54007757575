"""`Batch.add_parallel`: n samples of one prompt prefill it once and copy its KV rows into each other's slot.

Each sample equals the same stream run alone from an empty cache with its seed (seed + i), so sharing the prefix
changes nothing but the work done; greedy samples are n equal answers (onnxruntime's greedy ids); the prompt is
fed once (all but its last token by the first sample, the last token by each), and samples 2..n count the shared
prefix as cached. On both cache layouts: optimum's (Concat, made a KvAppend) and genai's GroupQueryAttention."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from llm_cases import expected
from logprob_cases import SLOTS, batched_session

from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.parallel_samples import sample_params
from onyxia.cli.llm.sampling import SamplingParams
from onyxia.core import InputError

CASES = ["llama-tiny-optimum", "qwen2-tiny-genai/fp32"]
N = 3


def _fed_ids(llm: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of token ids each run feeds (0: carried on the GPU from the run before)."""
    fed: list[int] = []
    run = llm._run

    def counting(feeds: dict[str, np.ndarray], wanted: list[str]) -> Any:
        ids = feeds.get(llm.signature.input_ids)
        fed.append(0 if ids is None else int(ids.size))
        return run(feeds, wanted)

    monkeypatch.setattr(llm, "_run", counting)
    return fed


def _alone(llm: Any, prompt: list[int], new: int, params: SamplingParams) -> list[int]:
    llm.reset()
    batch = llm.batch()  # fresh slot records: the prompt is prefilled in full
    stream = batch.add(Stream(prompt, new, params))
    batch.run()
    assert stream.cached == 0
    return stream.tokens


@pytest.mark.parametrize("directory", CASES)
def test_samples_equal_each_alone_with_its_seed_and_prefill_once(
    directory: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = batched_session(directory)
    prompt = expected(directory, "expected.json")["prompts"][0]["prompt_ids"]
    llm.reset()
    batch = llm.batch()
    fed = _fed_ids(llm, monkeypatch)
    params = sample_params(SamplingParams(temperature=1.0, seed=40), N)
    assert [p.seed for p in params] == [40, 41, 42]
    group = batch.add_parallel([Stream(prompt, 8, p, logprobs=1) for p in params])
    batch.run()
    monkeypatch.undo()
    # the prefix once, the last prompt token each; then decode steps feed a token a row (or carry it on the GPU)
    assert fed[:2] == [len(prompt) - 1, N] and all(count in (0, N) for count in fed[2:])
    assert [s.cached for s in group] == [0] + [len(prompt) - 1] * (N - 1)
    assert batch.samples.copied_bytes > 0
    answers = [s.tokens for s in group]
    assert len({tuple(a) for a in answers}) > 1, "three seeds, one answer: the seeds were not applied"
    for p, answer, stream in zip(params, answers, group):
        assert _alone(llm, prompt, 8, p) == answer, p.seed
        assert [t.token_id for t in stream.token_logprobs] == answer


@pytest.mark.parametrize("directory", CASES)
def test_greedy_samples_are_equal_answers(directory: str) -> None:
    llm = batched_session(directory)
    case = expected(directory, "expected.json")["prompts"][1]
    batch = llm.batch()
    group = batch.add_parallel([Stream(case["prompt_ids"], 12) for _ in range(SLOTS)])
    other = batch.add(Stream(case["prompt_ids"][:3], 4))  # waits for a slot, then runs beside nobody
    batch.run()
    assert [s.tokens for s in group] == [case["greedy_ids"][:12]] * SLOTS
    assert len(other.tokens) == 4


def test_a_group_is_admitted_only_when_every_sample_has_a_slot() -> None:
    llm = batched_session(CASES[0])
    batch = llm.batch()
    first = batch.add(Stream([3, 4, 5], 6))
    batch.step()
    group = batch.add_parallel([Stream([7, 8, 9, 10], 3) for _ in range(SLOTS)])
    batch.step()
    assert all(s.slot is None for s in group) and first.slot is not None
    batch.run()
    assert all(len(s.tokens) == 3 for s in group) and [s.cached for s in group[1:]] == [3] * (SLOTS - 1)


def test_bad_groups_are_refused() -> None:
    batch = batched_session(CASES[0]).batch()
    with pytest.raises(InputError, match="same prompt"):
        batch.add_parallel([Stream([1, 2], 2), Stream([1, 3], 2)])
    with pytest.raises(InputError, match=f"{SLOTS + 1} samples need as many slots; the session has {SLOTS}"):
        batch.add_parallel([Stream([1, 2], 2) for _ in range(SLOTS + 1)])
    assert not batch.waiting
