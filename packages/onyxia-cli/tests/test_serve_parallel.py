"""`onyxia serve --parallel 8`: many clients decode together, each gets what it gets alone.

Eight clients (the `openai` client, streamed and whole, greedy and seeded) ask at once of a server whose session
holds 8 slots; each answer equals the same request asked alone of the same server. One client leaves mid-stream
and its slot is freed; the metrics count the slots, the batch sizes and the slots whose cache holds tokens."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from llm_cases import DATA
from serve_cases import MODEL, running

from onyxia.cli.serve import create_app

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
