"""Aggregate throughput and time to first token of `onyxia serve` at 1, 4 and 8 concurrent clients.

Starts the server in this process (uvicorn in a thread on a free port), warms it up, then for each
concurrency runs `--requests` streamed chat completions per client with the `openai` client, each
generating exactly `--max-tokens` tokens (`ignore_eos`, temperature 0), and prints a Markdown table:
aggregate completion tok/s over the wall time, and p50/p95 time to first token (queue wait
included: one worker serves the clients in turn, so TTFT grows with the queue).

    python tools/serve_bench.py [MODEL_DIR] [--precision P] [--max-length N] [--max-tokens 64]
                                [--requests 2] [--clients 1,4,8]

Without MODEL_DIR it serves the built-in demo, as `onyxia serve` does.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PROMPTS = ["Tell me a fortune about love", "What does tomorrow hold?", "A wise saying, please", "Predict my week"]


def _serve(app: object) -> tuple[str, object, threading.Thread]:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("the server did not start within 60 s")
        time.sleep(0.05)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/v1", server, thread


def _one(base_url: str, prompt: str, max_tokens: int) -> tuple[float, int]:
    """(time to first token, completion tokens) of one streamed chat completion."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=600)
    start, first, tokens = time.perf_counter(), None, 0
    stream = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - start
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    return (first if first is not None else time.perf_counter() - start), tokens


def _round(base_url: str, clients: int, requests: int, max_tokens: int) -> tuple[float, float, float]:
    def client(index: int) -> list[tuple[float, int]]:
        return [_one(base_url, PROMPTS[(index + r) % len(PROMPTS)], max_tokens) for r in range(requests)]

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = [r for rs in pool.map(client, range(clients)) for r in rs]
    wall = time.perf_counter() - start
    ttfts = sorted(t for t, _ in results)
    p95 = ttfts[min(len(ttfts) - 1, round(0.95 * (len(ttfts) - 1)))]
    return sum(n for _, n in results) / wall, statistics.median(ttfts), p95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", nargs="?", type=Path, default=None)
    parser.add_argument("--precision", default=None)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2, help="requests per client per round")
    parser.add_argument("--clients", default="1,4,8", help="comma-separated concurrency levels")
    args = parser.parse_args()
    levels = [int(c) for c in args.clients.split(",")]

    from onyxia.cli.serve import create_app

    app = create_app(args.model_dir, precision=args.precision, max_length=args.max_length, max_queue=max(levels))
    session = app.state.onyxia.session
    base_url, server, thread = _serve(app)
    try:
        _one(base_url, PROMPTS[0], 4)  # warm-up
        rows = [(c, *_round(base_url, c, args.requests, args.max_tokens)) for c in levels]
    finally:
        server.should_exit = True  # type: ignore[attr-defined]
        thread.join(30)
    print(f"{app.state.onyxia.model} [{session.model_dir.precision}] on {session.adapter}, ", end="")
    print(f"{args.max_tokens} tokens per request, {args.requests} requests per client\n")
    print("| clients | aggregate tok/s | TTFT p50 (ms) | TTFT p95 (ms) |")
    print("|---:|---:|---:|---:|")
    for clients, rate, p50, p95 in rows:
        print(f"| {clients} | {rate:.1f} | {p50 * 1000:.0f} | {p95 * 1000:.0f} |")


if __name__ == "__main__":
    main()
