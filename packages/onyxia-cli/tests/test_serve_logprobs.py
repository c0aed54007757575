"""`logprobs`, `top_logprobs` and `n` through the real `openai` client, on chat and completions, streamed and not.

The server's session is a 4-slot llama (optimum) fixture. Log-probabilities are checked against log_softmax of
onnxruntime's logits for the ids the server's own session generates (`serve_cases.reference`), within the bar
derived in test_llm_logprobs.py; streamed answers reassemble to the whole ones; choice i of `n` equals the same
request alone with seed + i; bad values are 400s naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from llm_cases import DATA
from logprob_cases import SLOTS, batched_session, log_softmax, ort_logits
from serve_cases import chat_ids, reference, running

from onyxia.cli.serve import create_app

DIRECTORY = "llama-tiny-optimum"
MODEL = "tiny"
QUESTION: Any = [{"role": "user", "content": "Tell me a fortune"}]  # the client's message type
TOLERANCE = 2 * 1e-4 + 1e-5  # test_llm_logprobs.py: twice the logits' bar, plus float32 rounding


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Any, str]]:
    app = create_app(session=batched_session(DIRECTORY))
    with running(app) as url:
        yield app, url


@pytest.fixture(scope="module")
def client(server: tuple[Any, str]) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server[1]}/v1", api_key="unused", max_retries=0, timeout=120)


def _reference_rows(ids: list[int], tokens: list[int]) -> np.ndarray:
    return log_softmax(ort_logits(DATA / DIRECTORY, ids + tokens[:-1]))[len(ids) - 1 :]


def _decode(token: int) -> str:
    text: str = batched_session(DIRECTORY).tokenizer.decode([token])
    return text


def test_chat_logprobs_equal_onnxruntime_and_stream_the_same(server: tuple[Any, str], client: openai.OpenAI) -> None:
    app, _ = server
    ids = chat_ids(batched_session(DIRECTORY), QUESTION)
    text, tokens = reference(app, ids, 12)
    rows = _reference_rows(ids, tokens)
    answer = client.chat.completions.create(
        model=MODEL, messages=QUESTION, temperature=0, max_tokens=12, logprobs=True, top_logprobs=3
    )
    assert answer.choices[0].logprobs is not None and answer.choices[0].logprobs.content is not None
    content = answer.choices[0].logprobs.content
    shown = [t for t in tokens if t not in app.state.onyxia.chat_stops]  # a stop token is not part of the text
    assert answer.choices[0].message.content == text and [c.token for c in content] == [_decode(t) for t in shown]
    for step, (token, item) in enumerate(zip(shown, content)):
        assert abs(item.logprob - rows[step, token]) <= TOLERANCE
        assert item.bytes == list(item.token.encode("utf-8"))
        best = np.argsort(-rows[step], kind="stable")[:3]
        assert len(item.top_logprobs) == 3
        for top, want in zip(item.top_logprobs, best):  # onnxruntime's order, or a swap within the tolerance
            assert top.token == _decode(int(want)) or abs(top.logprob - rows[step, want]) <= TOLERANCE
        assert [abs(t.logprob - rows[step, w]) <= TOLERANCE for t, w in zip(item.top_logprobs, best)] == [True] * 3
    chunks: list[Any] = list(
        client.chat.completions.create(
            model=MODEL, messages=QUESTION, temperature=0, max_tokens=12, logprobs=True, top_logprobs=3, stream=True
        )
    )
    streamed = [
        item for c in chunks if c.choices and c.choices[0].logprobs for item in c.choices[0].logprobs.content or []
    ]
    assert [(i.token, i.logprob, [t.logprob for t in i.top_logprobs]) for i in streamed] == [
        (i.token, i.logprob, [t.logprob for t in i.top_logprobs]) for i in content
    ]
    plain = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=4)
    assert plain.choices[0].logprobs is None


def test_completion_logprobs_streamed_and_whole(server: tuple[Any, str], client: openai.OpenAI) -> None:
    app, _ = server
    ids = batched_session(DIRECTORY).tokenizer.encode("The fortune says")
    _, tokens = reference(app, ids, 8, stop=[])
    rows = _reference_rows(ids, tokens)
    whole = client.completions.create(model=MODEL, prompt=ids, max_tokens=8, temperature=0, logprobs=2)
    got = whole.choices[0].logprobs
    assert got is not None and got.tokens == [_decode(t) for t in tokens]
    assert np.allclose(got.token_logprobs or [], rows[np.arange(len(tokens)), tokens], atol=TOLERANCE, rtol=0)
    for step, top in enumerate(got.top_logprobs or []):
        best = [_decode(int(i)) for i in np.argsort(-rows[step], kind="stable")[:2]]
        assert set(best) <= set(top) and _decode(tokens[step]) in top and len(top) <= 3  # k best + the sampled one
    offsets = got.text_offset or []  # where each token's text starts in the answer, as sent
    assert offsets[0] == 0 and offsets == sorted(offsets) and offsets[-1] <= len(whole.choices[0].text)
    chunks = list(
        client.completions.create(model=MODEL, prompt=ids, max_tokens=8, temperature=0, logprobs=2, stream=True)
    )
    parts = [c.choices[0].logprobs for c in chunks if c.choices and c.choices[0].logprobs]
    assert [t for p in parts for t in p.tokens or []] == got.tokens
    assert [v for p in parts for v in p.token_logprobs or []] == got.token_logprobs
    assert [o for p in parts for o in p.text_offset or []] == offsets


def test_n_choices_equal_each_alone_with_seed_plus_index(client: openai.OpenAI) -> None:
    n, seed = 3, 11
    many = client.chat.completions.create(
        model=MODEL, messages=QUESTION, temperature=1.0, seed=seed, n=n, max_tokens=10, logprobs=True
    )
    assert [c.index for c in many.choices] == list(range(n))
    alone = [
        client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=1.0, seed=seed + i, max_tokens=10)
        for i in range(n)
    ]
    assert [c.message.content for c in many.choices] == [a.choices[0].message.content for a in alone]
    assert len({c.message.content for c in many.choices}) > 1
    assert many.usage is not None and all(a.usage is not None for a in alone)
    assert many.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone if a.usage is not None)
    assert all(c.logprobs and c.logprobs.content for c in many.choices)
    chunks: list[Any] = list(
        client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            temperature=1.0,
            seed=seed,
            n=n,
            max_tokens=10,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts = [""] * n
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
    assert texts == [c.message.content for c in many.choices]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == many.usage.completion_tokens


def test_n_on_completions_streamed_with_usage(client: openai.OpenAI) -> None:
    whole = client.completions.create(model=MODEL, prompt="Luck", max_tokens=6, temperature=0, n=2)
    assert [c.index for c in whole.choices] == [0, 1] and whole.choices[0].text == whole.choices[1].text  # greedy
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt="Luck",
            max_tokens=6,
            temperature=0,
            n=2,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts = ["", ""]
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.text
    assert texts == [c.text for c in whole.choices]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("path", "body", "param", "message"),
    [
        ("chat", {"n": SLOTS + 1}, "n", f"n is {SLOTS + 1}; expected 1 to {SLOTS}"),
        ("chat", {"n": 0}, "n", "n is 0"),
        ("chat", {"logprobs": True, "top_logprobs": 21}, "top_logprobs", "expected 0 to 20"),
        ("chat", {"top_logprobs": 2}, "top_logprobs", "needs logprobs set to true"),
        ("chat", {"logprobs": 3}, "logprobs", "expected true or false"),
        ("completions", {"logprobs": 6}, "logprobs", "expected an integer 0 to 5"),
        ("completions", {"n": 9}, "n", "n is 9"),
    ],
)
def test_bad_values_are_400s_naming_the_field(
    server: tuple[Any, str], path: str, body: dict[str, Any], param: str, message: str
) -> None:
    _, url = server
    base = {"messages": QUESTION} if path == "chat" else {"prompt": "Luck"}
    endpoint = "/v1/chat/completions" if path == "chat" else "/v1/completions"
    response = httpx.post(f"{url}{endpoint}", json={**base, **body, "max_tokens": 2}, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and message in error["message"]
