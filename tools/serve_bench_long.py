"""`tools/serve_bench.py --long-prompt N`: what a newcomer's long prompt costs the streams already decoding.

D streams decode; once each has streamed a few tokens, a newcomer sends an N-token prompt. The batch prefills
it one chunk per step (`LlmSession.prefill_chunk`) between decode steps, so each running stream waits up to one
chunk's prefill per step: the gaps between its tokens while the newcomer prefills, against one decode step
before it arrived, and the newcomer's time to first token are the two sides of the chunk's trade-off.
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from serve_bench_clients import PROMPTS, chat_stream, make_client

__all__ = ["LongRow", "long_prompt", "long_round", "newcomer", "print_long"]

# the newcomer's text (tokenized, repeated to length and shuffled)
TEXT = (
    "The batch prefills a newcomer's prompt one chunk per step while the other streams keep decoding, so no "
    "running stream waits for a whole prompt. A larger chunk keeps the matrix tiles full and reaches the first "
    "token sooner; a smaller one keeps the gaps between the running streams' tokens short. "
)


class LongRow(NamedTuple):
    chunk: int
    decoders: int
    ttft: float  # the newcomer's
    step: float  # median gap between a decoding stream's tokens before the newcomer arrived
    p95: float  # gaps that ended while the newcomer prefilled
    worst: float


def _decoder(base_url: str, prompt: str, max_tokens: int, times: list[float], stop: threading.Event) -> None:
    """A chat stream that records when each piece of text arrives, until `stop` is set."""
    stream = chat_stream(make_client(base_url), prompt, max_tokens)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter())
        if stop.is_set():
            break
    stream.close()  # the server sees the client leave: the slot frees at the next step


def newcomer(base_url: str, prompt: list[int]) -> tuple[float, float]:
    """A streamed completion of token ids: when it was sent and when its first text arrived."""
    client = make_client(base_url)
    start = time.perf_counter()
    stream = client.completions.create(
        model="any", prompt=prompt, max_tokens=2, temperature=0, stream=True, extra_body={"ignore_eos": True}
    )
    first = None
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].text:
            first = time.perf_counter()
    return start, first if first is not None else time.perf_counter()


def long_round(base_url: str, decoders: int, prompt: list[int], chunk: int, max_tokens: int) -> LongRow:
    times: list[list[float]] = [[] for _ in range(decoders)]
    stop = threading.Event()
    with ThreadPoolExecutor(decoders) as pool:
        running = [
            pool.submit(_decoder, base_url, PROMPTS[i % len(PROMPTS)], max_tokens, times[i], stop)
            for i in range(decoders)
        ]
        while any(len(t) < 4 for t in times):  # every stream past its first token, decoding together
            for future in running:
                if future.done():
                    stop.set()
                    future.result()  # a failed stream raises here
                    raise SystemExit("a decoding stream ended before the newcomer arrived: raise --max-length")
            time.sleep(0.01)
        start, first = newcomer(base_url, prompt)
        time.sleep(0.5)
        stop.set()
    before = [b - a for t in times for a, b in itertools.pairwise(t) if b <= start]
    during = sorted(b - a for t in times for a, b in itertools.pairwise(t) if start < b <= first + 0.5)
    p95 = during[min(len(during) - 1, round(0.95 * (len(during) - 1)))] if during else 0.0
    return LongRow(chunk, decoders, first - start, statistics.median(before), p95, max(during, default=0.0))


def long_prompt(session: object, tokens: int, seed: int) -> list[int]:
    """`tokens` ids of real text, shuffled by `seed`: no two rounds share a prefix a slot could keep."""
    import numpy as np

    ids = session.tokenizer.encode(TEXT)  # type: ignore[attr-defined]
    ids = (ids * (tokens // len(ids) + 1))[:tokens]
    return [int(i) for i in np.random.default_rng(seed).permutation(ids)]


def print_long(rows: list[LongRow], tokens: int) -> None:
    print(f"| prefill chunk | decoding streams | newcomer ({tokens} tokens) TTFT (ms) | decode step (ms) ", end="")
    print("| gap p95 (ms) | gap max (ms) | max / step |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r.chunk} | {r.decoders} | {r.ttft * 1000:.0f} | {r.step * 1000:.0f} | {r.p95 * 1000:.0f} "
            f"| {r.worst * 1000:.0f} | {r.worst / r.step:.1f} |"
        )
