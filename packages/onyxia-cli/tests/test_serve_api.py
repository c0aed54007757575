"""The API through the real `openai` client: answers equal `LlmSession.generate`'s, streamed or not;
stop strings and ids, max_tokens, usage, KV reuse across turns, models, health, metrics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families
from serve_cases import MODEL, chat_ids, reference, running, tiny_session

from onyxia.cli.serve import create_app
from onyxia.cli.serve.app import STATIC_DIR

QUESTION = [{"role": "user", "content": "Tell me a fortune"}]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Any, str]]:
    app = create_app(session=tiny_session())
    with running(app) as url:
        yield app, url


@pytest.fixture(scope="module")
def client(server: tuple[Any, str]) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server[1]}/v1", api_key="unused", max_retries=0, timeout=60)


def _metric(url: str, name: str, **labels: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def test_chat_completion_equals_generate(server: tuple[Any, str], client: openai.OpenAI) -> None:
    app, _ = server
    ids = chat_ids(tiny_session(), QUESTION)
    text, tokens = reference(app, ids, 24)
    answer = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=24)
    assert answer.choices[0].message.content == text and text
    assert answer.choices[0].finish_reason == ("stop" if len(tokens) < 24 else "length")
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (len(ids), len(tokens))
    assert answer.usage.total_tokens == len(ids) + len(tokens)
    assert answer.model == MODEL and answer.object == "chat.completion"


def test_streamed_chat_equals_generate_and_ends_with_done(server: tuple[Any, str], client: openai.OpenAI) -> None:
    app, url = server
    ids = chat_ids(tiny_session(), QUESTION)
    text, tokens = reference(app, ids, 24)
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            temperature=0,
            max_tokens=24,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(pieces) == text and len([p for p in pieces if p]) > 1  # really streamed
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["stop" if len(tokens) < 24 else "length"]
    usage = chunks[-1].usage
    assert usage is not None and not chunks[-1].choices
    assert (usage.prompt_tokens, usage.completion_tokens) == (len(ids), len(tokens))
    body = {"messages": QUESTION, "temperature": 0, "max_tokens": 4, "stream": True}
    raw = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
    assert raw.headers["content-type"].startswith("text/event-stream")
    events = [line for line in raw.text.split("\n\n") if line]
    assert events[-1] == "data: [DONE]" and all(e.startswith("data: {") for e in events[:-1])


def test_max_tokens_and_completion_tokens_alias(server: tuple[Any, str], client: openai.OpenAI) -> None:
    app, _ = server
    ids = chat_ids(tiny_session(), QUESTION)
    text, tokens = reference(app, ids, 5)
    assert len(tokens) == 5  # the fixture does not stop this early
    for limit in ({"max_tokens": 5}, {"max_completion_tokens": 5}):
        answer = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, **limit)
        assert answer.choices[0].message.content == text
        assert answer.choices[0].finish_reason == "length" and answer.usage.completion_tokens == 5


def test_stop_strings_cut_the_answer_before_the_stop(server: tuple[Any, str], client: openai.OpenAI) -> None:
    app, _ = server
    ids = chat_ids(tiny_session(), QUESTION)
    text, _ = reference(app, ids, 24)
    stop = text[len(text) // 2 : len(text) // 2 + 3]  # spans a token boundary or not: either way held back
    expected = text[: text.index(stop)]
    answer = client.chat.completions.create(
        model=MODEL, messages=QUESTION, temperature=0, max_tokens=24, stop=[stop, "\x00never"]
    )
    assert answer.choices[0].message.content == expected
    assert answer.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(
        model=MODEL, messages=QUESTION, temperature=0, max_tokens=24, stop=stop, stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == expected


def test_stop_token_ids_extension(server: tuple[Any, str], client: openai.OpenAI) -> None:
    app, _ = server
    llm = tiny_session()
    ids = chat_ids(llm, QUESTION)
    _, tokens = reference(app, ids, 24)
    stop_id = tokens[3]
    expected = llm.tokenizer.decode(tokens[: tokens.index(stop_id)])
    for extra in ({"stop_token_ids": [stop_id]}, {"stop": [stop_id]}):
        answer = client.chat.completions.create(
            model=MODEL, messages=QUESTION, temperature=0, max_tokens=24, extra_body=extra
        )
        assert answer.choices[0].message.content == expected
        assert answer.choices[0].finish_reason == "stop"
        assert answer.usage is not None and answer.usage.completion_tokens == tokens.index(stop_id) + 1


def test_text_completion_equals_generate(server: tuple[Any, str], client: openai.OpenAI) -> None:
    app, _ = server
    llm = tiny_session()
    prompt = "Once upon a time"
    ids = llm.tokenizer.encode(prompt)
    text, tokens = reference(app, ids, 12, stop=llm.model_dir.eos_token_ids)
    answer = client.completions.create(model=MODEL, prompt=prompt, temperature=0, max_tokens=12)
    assert answer.choices[0].text == text and answer.object == "text_completion"
    assert answer.usage is not None and (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (
        len(ids),
        len(tokens),
    )
    streamed = client.completions.create(model=MODEL, prompt=ids, temperature=0, max_tokens=12, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == text


def test_penalties_and_logit_bias_answer_as_the_session_does(server: tuple[Any, str], client: openai.OpenAI) -> None:
    """OpenAI's presence_penalty, frequency_penalty and logit_bias (ids as string keys) reach the sampler: the
    answer is `generate_ids`' with the same SamplingParams, and differs from the plain greedy one."""
    from onyxia.cli.llm import SamplingParams

    app, _ = server
    llm = tiny_session()
    ids = llm.tokenizer.encode("Once upon a time")
    favoured = llm.tokenizer.encode(" fortune")[-1]
    params = SamplingParams(presence_penalty=1.2, frequency_penalty=0.5, logit_bias=((favoured, 4.0),))
    stops = llm.model_dir.eos_token_ids
    with app.state.onyxia.engine.paused(timeout=60) as paused:
        paused.reset()
        tokens = list(paused.generate_ids(ids, 16, params, stop=stops))
    text = llm.tokenizer.decode([t for t in tokens if t not in stops])
    answer = client.completions.create(
        model=MODEL,
        prompt=ids,
        temperature=0,
        max_tokens=16,
        presence_penalty=1.2,
        frequency_penalty=0.5,
        logit_bias={str(favoured): 4.0},
    )
    assert answer.choices[0].text == text and answer.usage is not None
    assert answer.usage.completion_tokens == len(tokens)
    plain = client.completions.create(model=MODEL, prompt=ids, temperature=0, max_tokens=16)
    assert plain.choices[0].text != text


def test_a_follow_up_turn_prefills_only_the_new_tokens(server: tuple[Any, str], client: openai.OpenAI) -> None:
    app, url = server
    llm = tiny_session()
    first = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=8)
    follow_up = [
        *QUESTION,
        {"role": "assistant", "content": first.choices[0].message.content or ""},
        {"role": "user", "content": "And another one"},
    ]
    ids = chat_ids(llm, follow_up)
    text, _ = reference(app, ids, 8)
    client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=8)
    held = list(llm.history)
    common = next((i for i, (a, b) in enumerate(zip(held, ids)) if a != b), len(held))
    prefilled = _metric(url, "onyxia_prefill_tokens_total")
    second = client.chat.completions.create(model=MODEL, messages=follow_up, temperature=0, max_tokens=8)
    assert second.choices[0].message.content == text
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached == common > len(chat_ids(llm, QUESTION)) - 1  # the whole first turn came from the cache
    # and the server prefilled only the rest
    assert _metric(url, "onyxia_prefill_tokens_total") - prefilled == len(ids) - cached


def test_models_health_and_metrics(server: tuple[Any, str], client: openai.OpenAI) -> None:
    _, url = server
    assert [m.id for m in client.models.list()] == [MODEL]
    health = httpx.get(f"{url}/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    before = _metric(url, "onyxia_requests_total", endpoint="/v1/chat/completions", status="200")
    generated = _metric(url, "onyxia_completion_tokens_total")
    answer = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=3)
    text = httpx.get(f"{url}/metrics").text
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {
        "onyxia_requests",
        "onyxia_prompt_tokens",
        "onyxia_completion_tokens",
        "onyxia_time_to_first_token_seconds",
        "onyxia_decode_tokens_per_second",
        "onyxia_queue_depth",
    } <= names
    assert _metric(url, "onyxia_requests_total", endpoint="/v1/chat/completions", status="200") == before + 1
    assert answer.usage is not None
    assert _metric(url, "onyxia_completion_tokens_total") == generated + answer.usage.completion_tokens
    assert _metric(url, "onyxia_time_to_first_token_seconds_count") >= 1


def test_the_page_is_served_once_it_ships(server: tuple[Any, str]) -> None:
    """`/` is static/index.html (the chat page) when the package has it, else a JSON 404."""
    _, url = server
    page = httpx.get(f"{url}/")
    if (STATIC_DIR / "index.html").is_file():
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.text == (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    else:
        assert page.status_code == 404 and page.json()["error"]["type"] == "not_found_error"
