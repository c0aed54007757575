"""One worker, a bounded FIFO queue: concurrent clients get what they get alone, a full queue is 429
with Retry-After, and a client that leaves stops its generation within one decode step."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from serve_cases import chat_ids, reference, running, tiny_session

from onyxia.cli.llm import SamplingParams
from onyxia.cli.llm.chat import chat_stop_ids
from onyxia.cli.serve import create_app
from onyxia.cli.serve.jobs import Event, Finished, GenerationRequest, Job, TextDelta

QUEUE = 8
TOPICS = ["love", "money", "work", "travel", "luck", "friends", "health", "the sea"]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Any, str]]:
    app = create_app(session=tiny_session(), max_queue=QUEUE)
    with running(app) as url:
        yield app, url


def _ask(url: str, topic: str, max_tokens: int = 12) -> str:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
    messages = [{"role": "user", "content": f"Tell me a fortune about {topic}"}]
    answer = client.chat.completions.create(model="any", messages=messages, temperature=0, max_tokens=max_tokens)
    return answer.choices[0].message.content or ""


def test_eight_concurrent_clients_get_what_they_get_alone(server: tuple[Any, str]) -> None:
    app, url = server
    llm = tiny_session()
    alone = [_ask(url, topic) for topic in TOPICS]
    for topic, text in zip(TOPICS[:2], alone):  # alone, through the server, is what generate() gives
        ids = chat_ids(llm, [{"role": "user", "content": f"Tell me a fortune about {topic}"}])
        assert reference(app, ids, 12)[0] == text
    with ThreadPoolExecutor(len(TOPICS)) as pool:
        together = list(pool.map(lambda topic: _ask(url, topic), TOPICS))
    assert together == alone
    assert len(set(alone)) > 1  # the prompts really differ


def test_a_full_queue_answers_429_with_retry_after(server: tuple[Any, str]) -> None:
    app, url = server
    engine = app.state.onyxia.engine
    results: list[str] = []
    with engine.paused(timeout=60):  # the worker holds still; admission goes on
        workers = [threading.Thread(target=lambda t=t: results.append(_ask(url, t, 3))) for t in TOPICS[:QUEUE]]
        for worker in workers:
            worker.start()
        for _ in range(200):
            if engine.queue_depth == QUEUE:
                break
            threading.Event().wait(0.05)
        assert engine.queue_depth == QUEUE
        refused = httpx.post(f"{url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json()["error"]["type"] == "rate_limit_error"
        with pytest.raises(openai.RateLimitError, match="busy"):
            _ask(url, "one too many")
        assert httpx.get(f"{url}/health").json()["queue_depth"] == QUEUE
    for worker in workers:
        worker.join(120)
    assert len(results) == QUEUE  # everyone admitted was served once the worker went on
    assert engine.queue_depth == 0


def test_cancelling_stops_within_one_decode_step(server: tuple[Any, str]) -> None:
    """The engine itself: the client's cancel lands while a token is being delivered; the worker
    samples nothing more, and the session's cache is consistent for the next request."""
    app, _ = server
    engine, llm = app.state.onyxia.engine, tiny_session()
    ids = chat_ids(llm, [{"role": "user", "content": "Tell me a long fortune"}])
    events: list[Event] = []
    at_cancel: list[int] = []

    def sink(event: Event) -> None:  # runs on the worker thread, as the app's sink does
        events.append(event)
        if sum(isinstance(e, TextDelta) for e in events) == 3 and not at_cancel:
            at_cancel.append(job.produced)
            job.cancel()

    job = Job(GenerationRequest(ids, llm.max_length - len(ids), SamplingParams(), frozenset()), sink)
    engine.submit(job)
    assert engine.wait_idle(60)
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.reason == "cancelled"
    assert finished.completion_tokens - at_cancel[0] <= 1 < llm.max_length - len(ids) - 10
    # the cache holds the prompt and the tokens fed: all but the last, or (a decode step already run ahead of
    # the cancel, `llm/batch.py`) the last one too
    assert llm.position == len(llm.history) and llm.history[: len(ids)] == ids
    assert len(llm.history) - len(ids) in (finished.completion_tokens - 1, finished.completion_tokens)
    served = _ask_ids(app, ids)  # reuses the cancelled generation's cache: still exact
    assert served == reference(app, ids, 10)[0]


def _ask_ids(app: Any, ids: list[int]) -> str:
    done = threading.Event()
    parts: list[str] = []

    def sink(event: Event) -> None:
        if isinstance(event, TextDelta):
            parts.append(event.text)
        else:
            done.set()

    request = GenerationRequest(ids, 10, SamplingParams(), frozenset(chat_stop_ids(tiny_session())))
    app.state.onyxia.engine.submit(Job(request, sink))
    assert done.wait(60)
    return "".join(parts)


def test_a_client_that_disconnects_mid_stream_stops_its_generation(server: tuple[Any, str]) -> None:
    app, url = server
    llm = tiny_session()
    messages = [{"role": "user", "content": "Tell me a fortune about the stars"}]
    ids = chat_ids(llm, messages)
    budget = llm.max_length - len(ids)
    engine = app.state.onyxia.engine
    body = {"messages": messages, "temperature": 0, "max_tokens": budget, "ignore_eos": True, "stream": True}
    before = _count(url, 'onyxia_generations_total{finish_reason="cancelled"}')
    generated = _count(url, "onyxia_completion_tokens_total")
    with httpx.Client(timeout=60) as http, http.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
        chunks = 0
        for line in response.iter_lines():
            chunks += line.startswith("data: {")
            if chunks == 4:
                break
    assert engine.wait_idle(60)
    assert _count(url, 'onyxia_generations_total{finish_reason="cancelled"}') == before + 1
    assert _count(url, "onyxia_completion_tokens_total") - generated < budget
    assert llm.position == len(llm.history)
    served = _ask(url, "the stars", 10)  # reuses the cancelled generation's cache: still exact
    assert served == reference(app, ids, 10)[0]


def _count(url: str, sample: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0
