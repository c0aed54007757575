"""`onyxia serve --parallel 8`: many clients decode together, each gets what it gets alone.

Eight clients (the `openai` client, streamed and whole, greedy and seeded) ask at once of a server whose session
holds 8 slots; each answer equals the same request asked alone of the same server. One client leaves mid-stream
and its slot is freed; the metrics count the slots, the batch sizes and the slots whose cache holds tokens. An idle
server gathers requests sent together into one run, and never holds a newcomer while others decode."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from llm_cases import DATA
from serve_cases import MODEL, chat_ids, running

from onyxia.cli.serve import create_app
from onyxia.cli.serve.engine import GATHER_LIMIT

SLOTS = 8
TOPICS = ["love", "money", "work", "travel", "luck", "friends", "health", "the sea"]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Any, str]]:
    from onyxia.cli.llm import LlmSession

    llm = LlmSession.from_pretrained(DATA / MODEL, "fp32", max_length=160, slots=SLOTS)
    app = create_app(session=llm, max_queue=8)
    with running(app) as url:
        yield app, url


def _ask(url: str, i: int, stream: bool) -> str:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
    messages = [{"role": "user", "content": f"Tell me a fortune about {TOPICS[i]}"}]
    sampling: dict[str, Any] = {"temperature": 0.9, "seed": i} if i % 2 else {"temperature": 0}
    if not stream:
        answer = client.chat.completions.create(model="any", messages=messages, max_tokens=12 + i, **sampling)
        return answer.choices[0].message.content or ""
    chunks = client.chat.completions.create(model="any", messages=messages, max_tokens=12 + i, stream=True, **sampling)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def _metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    match = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


def test_eight_clients_at_once_each_get_what_they_get_alone(server: tuple[Any, str]) -> None:
    _, url = server
    alone = [_ask(url, i, stream=i % 3 == 0) for i in range(SLOTS)]
    with ThreadPoolExecutor(SLOTS) as pool:
        together = list(pool.map(lambda i: _ask(url, i, stream=i % 3 == 0), range(SLOTS)))
    assert together == alone
    assert len(set(alone)) > 1
    assert _metric(url, "onyxia_slots") == SLOTS
    assert _metric(url, "onyxia_slots_active") == 0  # every slot given back
    assert _metric(url, "onyxia_kv_slots_in_use") >= 1  # their caches kept for the next request's prefix
    steps = _metric(url, "onyxia_batch_size_count")
    batched = steps - _metric(url, 'onyxia_batch_size_bucket{le="1.0"}')
    assert batched > 0  # some decode steps advanced several clients at once


def test_a_client_that_leaves_frees_its_slot_while_the_others_go_on(server: tuple[Any, str]) -> None:
    _, url = server
    alone = _ask(url, 2, stream=False)
    body = {"model": "any", "messages": [{"role": "user", "content": "Tell me a long fortune"}], "max_tokens": 100}
    left = threading.Event()

    def leave() -> None:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json={**body, "stream": True}, timeout=60) as r:
            for i, _ in enumerate(r.iter_lines()):
                if i == 3:
                    break  # the client goes away after three events
        left.set()

    leaver = threading.Thread(target=leave)
    leaver.start()
    assert _ask(url, 2, stream=False) == alone  # the one who stays is served as if alone
    leaver.join(60)
    assert left.is_set()
    engine = server[0].state.onyxia.engine
    assert engine.wait_idle(30)
    assert _metric(url, "onyxia_slots_active") == 0


def _job(llm: Any, topic: str, max_tokens: int, done: threading.Event, tokens: list[str]) -> Any:
    from onyxia.cli.llm import SamplingParams
    from onyxia.cli.serve.jobs import Finished, GenerationRequest, Job, TextDelta

    ids = chat_ids(llm, [{"role": "user", "content": f"Tell me a fortune about {topic}"}])

    def sink(event: Any) -> None:  # on the worker thread
        if isinstance(event, TextDelta):
            tokens.append(event.text)
        elif isinstance(event, Finished):
            done.set()

    return Job(GenerationRequest(ids, max_tokens, SamplingParams(), frozenset()), sink)  # no stop ids: all tokens


class _Steps:
    """The engine's steps, recorded: when each began and how many jobs ran in it."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.original = engine, engine._step
        self.started: list[float] = []
        self.jobs: list[int] = []

    def __enter__(self) -> _Steps:
        def step() -> None:
            self.started.append(time.monotonic())
            self.jobs.append(len(self.engine._running))
            self.original()

        self.engine._step = step
        return self

    def __exit__(self, *_: object) -> None:
        del self.engine._step  # the class's method again


def test_requests_sent_together_start_together_and_nobody_decoding_waits(server: tuple[Any, str]) -> None:
    """An idle worker holds a newcomer until no request has arrived for `gather` seconds: three requests a few ms
    apart (one only noted as arriving in between, as the app does when a request enters) start in one run, a lone
    one waits `gather` once; a newcomer while a stream decodes joins at the next step, not `gather` later."""
    app, _ = server
    engine, llm = app.state.onyxia.engine, app.state.onyxia.session
    assert engine.wait_idle(60)
    gather, engine.gather = engine.gather, 0.5  # wide: sleeps of 20 ms stay well inside it on a loaded machine
    try:
        done = [threading.Event() for _ in range(3)]
        jobs = [_job(llm, TOPICS[i], 4, done[i], []) for i in range(3)]
        with _Steps(engine) as steps:
            submitted = time.monotonic()
            engine.submit(jobs[0])
            time.sleep(0.02)
            engine.note_arrival()
            time.sleep(0.02)
            engine.submit(jobs[1])
            time.sleep(0.02)
            last = time.monotonic()
            engine.submit(jobs[2])
            assert all(d.wait(60) for d in done)
        assert steps.jobs[0] == 3  # one run started all three
        assert steps.started[0] - last >= 0.5 - 0.01  # after a quiet `gather`
        assert steps.started[0] - submitted < 0.5 * GATHER_LIMIT
        assert engine.wait_idle(60)

        first, second = threading.Event(), threading.Event()
        streamed: list[str] = []
        with _Steps(engine) as steps:
            engine.submit(_job(llm, TOPICS[3], 40, first, streamed))
            while len(streamed) < 3:
                time.sleep(0.001)
            joining = time.monotonic()
            engine.submit(_job(llm, TOPICS[4], 4, second, []))
            assert first.wait(60) and second.wait(60)
        joined = next(t for t, n in zip(steps.started, steps.jobs) if n == 2)
        assert joined - joining < 0.25  # the next step took it (a tiny model's step: milliseconds), no gather
    finally:
        engine.gather = gather
