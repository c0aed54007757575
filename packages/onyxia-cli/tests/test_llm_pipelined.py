"""Pipelined decoding (`llm/pipelined.py`), greedy and seeded top-k / temperature sampling (drawn on the
GPU by SampleToken): step N+1 is submitted before step N's token is read, and the tokens, the cache
position and the history equal unpipelined generation's on every fixture, also when a stop id or the
caller ends the generation with a step already submitted ahead. Top-p sampling draws on the host. Every
layout pipelines: onnxruntime-genai's fixed-capacity sliding-window caches, which shift (a step there could
not be taken back), are resident full caches in the session, their window applied by the attention."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from llm_cases import FIXTURES, Fixture, case_session, expected, fixture_id

from onyxia.cli.llm.sampling import SamplingParams
from onyxia.runtime.pending import PendingRun

_CASES = {(c.directory, c.precision): c for c in FIXTURES if c.accuracy_level is None}.values()
NEW_TOKENS = 12
GREEDY = SamplingParams()
SAMPLED = SamplingParams(temperature=1.5, top_k=40, seed=11)


@contextmanager
def _pipelined(llm: Any, on: bool) -> Iterator[None]:
    before = llm.pipelined
    llm.pipelined = on
    try:
        yield
    finally:
        llm.pipelined = before


def _generate(
    llm: Any,
    prompt: list[int],
    on: bool,
    stop: tuple[int, ...] = (),
    take: int | None = None,
    params: SamplingParams = GREEDY,
) -> tuple:
    """Tokens (the first `take` when given, the generator then closed), then the session's state."""
    llm.reset()
    with _pipelined(llm, on):
        stream = llm.generate_ids(prompt, NEW_TOKENS, params, stop=stop)
        tokens = [t for _, t in zip(range(take or NEW_TOKENS), stream)]
        stream.close()
    return tokens, llm.position, list(llm.history)


def _prompt(case: Fixture) -> list[int]:
    return list(expected(case.directory, case.expected)["prompts"][0]["prompt_ids"])


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.parametrize("case", _CASES, ids=fixture_id)
def test_pipelined_equals_unpipelined(case: Fixture, params: SamplingParams) -> None:
    llm = case_session(case)
    prompt = _prompt(case)
    plain = _generate(llm, prompt, on=False, params=params)
    assert _generate(llm, prompt, on=True, params=params) == plain
    stop = (plain[0][3],)  # a stop id met mid-generation: the step submitted ahead is taken back
    assert _generate(llm, prompt, on=True, stop=stop, params=params) == _generate(
        llm, prompt, on=False, stop=stop, params=params
    )
    assert _generate(llm, prompt, on=True, take=5, params=params) == _generate(
        llm, prompt, on=False, take=5, params=params
    )
    if params is SAMPLED:  # really drawn: another seed gives other tokens, the same seed the same
        other = _generate(llm, prompt, on=True, params=SamplingParams(temperature=1.5, top_k=40, seed=12))
        assert other[0] != plain[0]
        assert _generate(llm, prompt, on=True, params=params) == plain
    # genai's windowed caches are resident too (no shifting buffer left): every layout runs ahead
    assert not llm.shifting and llm._token_carried


def test_the_next_step_is_submitted_before_the_token_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    llm = case_session(next(iter(_CASES)))
    runs: list[PendingRun] = []  # kept alive, so each is told apart by its index
    events: list[tuple[str, int]] = []
    submit, read = type(llm.executor).submit, PendingRun.read

    def logged_submit(self: Any, *args: Any, **kwargs: Any) -> PendingRun:
        pending = submit(self, *args, **kwargs)
        runs.append(pending)
        events.append(("submit", len(runs) - 1))
        return pending

    def logged_read(self: PendingRun) -> dict:
        if not self.done:
            events.append(("read", next(i for i, r in enumerate(runs) if r is self)))
        return read(self)

    monkeypatch.setattr(type(llm.executor), "submit", logged_submit)
    monkeypatch.setattr(PendingRun, "read", logged_read)
    _generate(llm, [5, 6, 7, 8], on=True, params=SAMPLED)
    assert len(runs) == NEW_TOKENS, "the prefill and one step per token but the last"
    for n in range(1, len(runs)):  # step n+1 goes to the GPU before step n's token comes back
        assert events.index(("submit", n)) < events.index(("read", n - 1))


def test_top_p_draws_on_the_host_from_the_logits(monkeypatch: pytest.MonkeyPatch) -> None:
    llm = case_session(next(iter(_CASES)))
    read_logits: list[int] = []
    forward = type(llm)._forward

    def logged(self: Any, ids: list[int], outputs: list[str]) -> dict:
        read_logits.append(int(self.signature.logits in outputs))
        return forward(self, ids, outputs)

    monkeypatch.setattr(type(llm), "_forward", logged)
    tokens, _, _ = _generate(llm, [5, 6, 7, 8], on=True, params=SamplingParams(temperature=1.0, top_p=0.9, seed=3))
    assert len(tokens) == NEW_TOKENS and read_logits == [1] * NEW_TOKENS
