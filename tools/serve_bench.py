"""Aggregate throughput and time to first token of `onyxia serve` at 1, 4 and 8 concurrent clients.

Starts the server in this process (uvicorn in a thread on a free port) with `--parallel` slots (default 8:
that many requests decode together, `llm/batch.py`), warms it up, then for each concurrency runs
`--requests` streamed chat completions per client with the `openai` client (the clients start together, from a
process of their own: `serve_bench_clients.py`), each generating exactly
`--max-tokens` tokens (`ignore_eos`, temperature 0; the warm-up is a short round at the most clients, so
every batch size has run once), and prints a Markdown table: aggregate completion tok/s
over the round's wall time (prefills included), aggregate decode tok/s (tokens after each request's first,
over the span from the round's first first-token to its last token) and its ratio to the 1-client row, and
p50/p95 time to first token (queue wait included) with p95's ratio to the 1-client row's (a lone request's).

    python tools/serve_bench.py [MODEL_DIR] [--precision P] [--max-length N] [--parallel 8] [--lm-head exact]
                                [--max-tokens 64] [--requests 2] [--clients 1,4,8]
    python tools/serve_bench.py --synth qwen2 [--layout genai] ...   # `onyxia bench`'s full-size q4 model
    python tools/serve_bench.py --synth gemma3 ... --record docs/data/serving.json   # also into the docs' figures
    python tools/serve_bench.py --synth qwen2 --rounds 5 ...   # five rounds in one server, each level's median
    python tools/serve_bench.py --synth gemma3 --prefill-chunk 64,128,256,512 --long-prompt 1000 --clients 4

`--prefill-chunk 64,128,256,512` loads the session with the largest chunk (activations sized for it) and runs
every round at each chunk in turn (`LlmSession.prefill_chunk`, what `onyxia serve --prefill-chunk` sets), so
one load compares them. `--long-prompt N` runs the newcomer scenario instead, at each chunk and each `--clients`
count D: D streams decode (short prompts, as many tokens as it takes), and once each has streamed a few tokens a
newcomer sends an N-token prompt (a completion of token ids, shuffled per round so no slot holds its prefix);
it prints the newcomer's time to first token and the decoding streams' gaps between tokens: the median before
it arrived (one decode step) and the p95 and max while it prefilled (a running stream waits for a chunk's
prefill each step). `--requests` repeats each row, chunk by chunk in turn (64 128 ... 64 128 ...).

`--rounds N` runs the levels N times in turn in the same server (1 8 1 8 ...: each round's ratio compares
neighbours in time, on a shared machine whose speed drifts), prints each round, then each level's median of every
column and the rounds' decode ratios to one client; `--record` then keeps the medians and those ratios. One round
of 32 tokens swings by +-5% here, so a recorded figure from one round is a draw, not the machine's rate.

Without MODEL_DIR it serves the built-in demo, as `onyxia serve` does. `--synth ARCH` serves the synthetic
full-size 4-bit (MatMulNBits, q4) model `onyxia bench --arch ARCH` measures (gemma3: the 270m shape as
onnx-community lays it out; qwen2: Qwen2.5-0.5B's as onnxruntime-genai's builder does), written to the bench
cache on first use (`python -m onyxia.cli.bench --arch ARCH --precision q4 [--out DIR]` writes it alone).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.resources
import json
import os
import shlex
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

from serve_bench_clients import ClientProcess
from serve_bench_long import LongRow, long_prompt, long_round, newcomer, print_long


class Row(NamedTuple):
    clients: int
    rate: float  # completion tokens / wall
    decode_rate: float  # tokens after each first / (last end - earliest first token)
    p50: float
    p95: float


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


def _round(users: ClientProcess, base_url: str, clients: int, requests: int, max_tokens: int) -> Row:
    results = users.round(base_url, clients, requests, max_tokens)
    start = min(r.start for r in results)
    wall = max(r.end for r in results) - start
    ttfts = sorted(r.first - r.start for r in results)
    p95 = ttfts[min(len(ttfts) - 1, round(0.95 * (len(ttfts) - 1)))]
    span = max(r.end for r in results) - min(r.first for r in results)
    decoded = sum(max(r.tokens - 1, 0) for r in results)
    return Row(clients, sum(r.tokens for r in results) / wall, decoded / span, statistics.median(ttfts), p95)


def synthesized(arch: str, layout: str | None = None) -> tuple[Path, str | None]:
    """The bench's full-size q4 model directory for `arch` (written on first use) and the precision to ask."""
    from onyxia.cli.bench import arch_config, synthesize

    model = synthesize(arch_config(arch, "full", layout), precisions=("q4",))
    directory = model.model_dir("q4")
    return directory, "q4" if directory == model.directory else None  # onnx-community: one file per precision


def _print_rows(rows: list[Row]) -> None:
    print(
        "| clients | aggregate tok/s | aggregate decode tok/s | decode vs 1 client | TTFT p50 (ms) | TTFT p95 (ms) "
        "| p95 vs 1 client |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    base = next((r for r in rows if r.clients == 1), None)
    for r in rows:
        decode_ratio = f"{r.decode_rate / base.decode_rate:.2f}x" if base else "-"
        ttft_ratio = f"{r.p95 / base.p95:.2f}x" if base else "-"
        print(
            f"| {r.clients} | {r.rate:.2f} | {r.decode_rate:.2f} | {decode_ratio} | {r.p50 * 1000:.0f} "
            f"| {r.p95 * 1000:.0f} | {ttft_ratio} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", nargs="?", type=Path, default=None)
    parser.add_argument("--synth", metavar="ARCH", default=None, help="serve `onyxia bench --arch ARCH`'s q4 model")
    parser.add_argument("--layout", default=None, help="with --synth: the exporter's layout (default the family's)")
    parser.add_argument("--precision", default=None)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--parallel", type=int, default=8, help="sequences the session decodes together (slots)")
    parser.add_argument("--prefill-chunk", default=None, help="comma-separated chunks (default: the session's)")
    parser.add_argument("--long-prompt", type=int, default=None, metavar="N", help="the newcomer scenario")
    parser.add_argument("--lm-head", default="exact", help="exact, fp16 or int8 (LlmSession's lm_head; with a model)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2, help="requests per client per round")
    parser.add_argument("--clients", default="1,4,8", help="comma-separated concurrency levels")
    parser.add_argument("--rounds", type=int, default=1, help="run the levels this many times; report medians")
    parser.add_argument("--gather-ms", type=float, default=None, help="`onyxia serve --gather-ms` (default its)")
    parser.add_argument("--record", type=Path, default=None, help="write the rows into this docs figures file")
    args = parser.parse_args()
    levels = [int(c) for c in args.clients.split(",")]
    chunks = [int(c) for c in args.prefill_chunk.split(",")] if args.prefill_chunk else []
    if args.parallel < 1 or max(levels) >= args.parallel and args.long_prompt:
        parser.error(f"--parallel {args.parallel}: expected at least 1 (and more than --clients, with --long-prompt)")
    if min(levels + chunks + [args.rounds]) < 1 or (args.long_prompt is not None and args.long_prompt < 1):
        parser.error("--clients, --prefill-chunk, --rounds and --long-prompt take positive numbers")
    model_dir, precision = args.model_dir, args.precision
    if args.synth is not None:
        if model_dir is not None:
            parser.error("give MODEL_DIR or --synth ARCH, not both")
        model_dir, precision = synthesized(args.synth, args.layout)

    from onyxia.cli.llm import LlmSession
    from onyxia.cli.llm.cache_memory import kv_buffer_bytes
    from onyxia.cli.serve import create_app

    started = time.perf_counter()
    loaded = None
    if args.lm_head != "exact" or chunks:  # create_app loads with the exact head and its chunk; load it here
        if model_dir is None:
            from onyxia.cli.commands.llm_options import DEMO_MODEL_DIR

            model_dir = Path(str(importlib.resources.files("onyxia.cli.data") / DEMO_MODEL_DIR))
        loaded = LlmSession.from_pretrained(
            model_dir,
            precision,
            args.max_length,
            slots=args.parallel,
            lm_head=args.lm_head,
            prefill_chunk=max(chunks, default=None),
        )
    app = create_app(
        model_dir,
        precision=precision,
        max_length=args.max_length,
        max_queue=max(levels),
        parallel=args.parallel,
        session=loaded,
        **({} if args.gather_ms is None else {"gather": args.gather_ms / 1000}),
    )
    session = app.state.onyxia.session
    chunks = chunks or [session.prefill_chunk]
    base_url, server, thread = _serve(app)
    users = ClientProcess()
    tables: list[tuple[int, list[Row]]] = []
    long_rows: list[LongRow] = []
    try:
        # warm-up: drivers compile a pipeline at its first dispatch, per batch size
        _round(users, base_url, max(levels), 1, 4)
        if args.long_prompt:  # and per prefill length: one newcomer a chunk and a bit long at each chunk
            for c in chunks:
                session.prefill_chunk = c
                newcomer(base_url, long_prompt(session, c + 1, c))
        ready = time.perf_counter() - started
        for _ in range(args.requests if args.long_prompt else args.rounds):
            for c in chunks:
                session.prefill_chunk = c
                if args.long_prompt:
                    room = session.max_length - 64
                    prompt = long_prompt(session, args.long_prompt, len(long_rows) + 1000)
                    long_rows += [long_round(base_url, d, prompt, c, room) for d in levels]
                else:
                    tables.append((c, [_round(users, base_url, n, args.requests, args.max_tokens) for n in levels]))
    finally:
        users.close()
        server.should_exit = True  # type: ignore[attr-defined]
        thread.join(30)
    print(f"{session.model_dir.model_path} on {session.adapter}, {session.slots} slots, lm head {args.lm_head},")
    print(
        f"max_length {session.max_length}, {args.max_tokens} tokens per request, {args.requests} requests per ", end=""
    )
    print(f"client; load + warm-up {ready:.0f} s")
    kv = kv_buffer_bytes(session) / session.slots / 2**20
    print(f"KV caches {kv:.1f} MiB per slot; GPU buffers {session.executor.gpu_bytes / 2**20:.0f} MiB in all\n")
    if args.long_prompt:
        print_long(sorted(long_rows, key=lambda r: (r.decoders, r.chunk)), args.long_prompt)
    for i, (c, rows) in enumerate(tables):
        heading = f"round {i // len(chunks) + 1}, " if args.rounds > 1 else ""
        print(f"\n{heading}prefill chunk {c}:\n" if len(tables) > 1 else "", end="")
        _print_rows(rows)
    medians, ratios = _medians([rows for c, rows in tables if c == chunks[-1]])
    if args.rounds > 1:
        print(f"\nmedians of {args.rounds} rounds (prefill chunk {chunks[-1]}); decode vs 1 client by round: ", end="")
        print(", ".join(f"{r:.2f}x" for r in ratios) or "-")
        _print_rows(medians)
    if args.record is not None and tables:
        name = args.synth or session.model_dir.root.name
        label = precision or ("q4" if args.synth else "default")  # --synth serves the q4 model
        run_id = f"{name}-{label}-parallel{session.slots}"
        _record(args.record, run_id, session, args, medians, ratios if args.rounds > 1 else [])


def _medians(rounds: list[list[Row]]) -> tuple[list[Row], list[float]]:
    """Each level's median of every column over the rounds, and each round's aggregate decode rate at its most
    clients over its 1-client rate (none without a 1-client level)."""
    medians = [Row(*(statistics.median(col) for col in zip(*level))) for level in zip(*rounds)]
    ratios = [rows[-1].decode_rate / rows[0].decode_rate for rows in rounds if rows[0].clients == 1]
    return [r._replace(clients=int(r.clients)) for r in medians], ratios


def _model_label(model_path: Path) -> str:
    """The served file as the figures name it: under the bench cache from its model directory on
    (`qwen2-0.5b-synthetic/q4/model.onnx`: the genai layout keeps each precision in a folder), else its folder."""
    for parent in model_path.parents:
        if parent.name.endswith("-synthetic"):
            return model_path.relative_to(parent.parent).as_posix()
    return f"{model_path.parent.name}/{model_path.name}"


def _record(
    path: Path, run_id: str, session: object, args: argparse.Namespace, rows: list[Row], ratios: list[float]
) -> None:
    """Replace the run `run_id` in the docs' figures file (docs/data/serving.json) with these rows (and, from
    `--rounds`, each round's decode ratio at the most clients)."""
    entry = {
        "id": run_id,
        "model": _model_label(session.model_dir.model_path),  # type: ignore[attr-defined]
        "date": datetime.date.today().isoformat(),
        "command": shlex.join(["python", *sys.argv]),
        "machine": f"{session.adapter}, {os.cpu_count()} CPUs",  # type: ignore[attr-defined]
        "parallel": session.slots,  # type: ignore[attr-defined]
        "max_tokens": args.max_tokens,
        "rows": [
            {"clients": r.clients, "decode_tok_s": round(r.decode_rate, 2), "ttft_p50_ms": round(r.p50 * 1000)}
            | {"ttft_p95_ms": round(r.p95 * 1000), "completion_tok_s": round(r.rate, 2)}
            for r in rows
        ],
    }
    if ratios:
        entry |= {"rounds": len(ratios), "round_decode_ratios": [round(r, 2) for r in ratios]}
    doc = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"runs": []}
    runs = [entry if run["id"] == run_id else run for run in doc["runs"]]
    doc["runs"] = runs if entry in runs else [*runs, entry]  # in place, a new one last
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
