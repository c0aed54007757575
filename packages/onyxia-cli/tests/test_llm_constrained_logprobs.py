"""A grammar-constrained stream that also asks for log-probabilities: the ids the grammar forces are drawn one
step each (masked to the one allowed id) instead of fast-forwarded, so every token has the log-probability the
model gave it; the answer equals the same constrained stream without logprobs (which fast-forwards)."""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterator

import pytest
from openai.lib._pydantic import to_strict_json_schema
from structured_cases import DEMO_DIR, Book

from onyxia.cli.llm import LlmSession
from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.chat import chat_stop_ids
from onyxia.cli.llm.constraints import Constraint


@pytest.fixture(scope="module")
def llm() -> Iterator[LlmSession]:
    with importlib.resources.as_file(importlib.resources.files("onyxia.cli.data") / DEMO_DIR) as root:
        yield LlmSession.from_pretrained(root, max_length=256, slots=2)


def _run(llm: LlmSession, logprobs: int | None) -> Stream:
    prompt = llm.tokenizer.encode_chat_turn(llm.tokenizer.render_chat([{"role": "user", "content": "A book"}]))
    batch = llm.batch()
    stream = batch.add(
        Stream(
            prompt,
            60,
            stop=chat_stop_ids(llm),
            constraint=Constraint.json_schema(to_strict_json_schema(Book)),
            logprobs=logprobs,
        )
    )
    batch.run()
    return stream


def test_forced_ids_are_drawn_and_scored_when_logprobs_are_asked(llm: LlmSession) -> None:
    plain, scored = _run(llm, None), _run(llm, 3)
    assert plain.forced > 0, "the schema's keys are forced: the plain stream fast-forwards them"
    assert scored.forced == 0 and scored.tokens == plain.tokens
    Book.model_validate_json(llm.tokenizer.decode(scored.tokens))
    assert [item.token_id for item in scored.token_logprobs] == scored.tokens
    for item in scored.token_logprobs:
        values = [value for _, value in item.top]
        assert len(item.top) == 3 and values == sorted(values, reverse=True)
        assert item.logprob <= values[0] + 1e-6 <= 1e-6  # raw log_softmax: the sampled id at most the best
