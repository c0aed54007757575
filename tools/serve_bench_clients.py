"""The users of `tools/serve_bench.py`: streamed chat completions through the `openai` client, sent from a
process of their own.

Users' clients run on their own machines. Run in the server's process, their work held its GIL and counted as
the server's latency: each `openai.OpenAI()` builds an SSL context (~16 ms of CPU), so eight users making their
clients at a round's start delayed the server's first admission by ~110 ms and split eight simultaneous
arrivals over two prefill runs. Here one spawned process (no copy of the server's threads) holds a client per
user, made once and kept as a chat app keeps its client, and a round's users start together at a barrier.
Times are `time.perf_counter()` in that process; every figure is a difference of two of them.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, NamedTuple

__all__ = ["PROMPTS", "ClientProcess", "Request", "chat_stream", "make_client"]

# short chat prompts, user i's r-th request sends PROMPTS[(i + r) % 4]
PROMPTS = ["Tell me a fortune about love", "What does tomorrow hold?", "A wise saying, please", "Predict my week"]


class Request(NamedTuple):
    start: float  # perf_counter seconds, when the request was sent
    first: float  # when the first content arrived
    end: float
    tokens: int


def make_client(base_url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=3600)


def chat_stream(client: Any, prompt: str, max_tokens: int) -> Any:
    """A streamed greedy chat completion of exactly `max_tokens` tokens (`ignore_eos`), its usage in the last
    chunk: the request every serving measurement sends."""
    return client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )


def _one(client: Any, prompt: str, max_tokens: int) -> Request:
    """One streamed chat completion, timed."""
    start, first, tokens = time.perf_counter(), None, 0
    for chunk in chat_stream(client, prompt, max_tokens):
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter()
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    end = time.perf_counter()
    return Request(start, first if first is not None else end, end, tokens)


_CLIENTS: dict[str, list[Any]] = {}  # base URL -> one client per user, kept across rounds


def _round(base_url: str, users: int, requests: int, max_tokens: int) -> list[Request]:
    """`users` users at once, each sending `requests` requests one after another (runs in the client process)."""
    clients = _CLIENTS.setdefault(base_url, [])
    clients += [make_client(base_url) for _ in range(users - len(clients))]
    start = threading.Barrier(users)

    def user(index: int) -> list[Request]:
        start.wait()
        return [_one(clients[index], PROMPTS[(index + r) % len(PROMPTS)], max_tokens) for r in range(requests)]

    with ThreadPoolExecutor(users) as pool:
        return [r for rs in pool.map(user, range(users)) for r in rs]


class ClientProcess:
    """The process the users run in, started once for every round."""

    def __init__(self) -> None:
        self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))

    def round(self, base_url: str, users: int, requests: int, max_tokens: int) -> list[Request]:
        return self._pool.submit(_round, base_url, users, requests, max_tokens).result()

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)
