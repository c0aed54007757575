"""Options, and the soak from start to verdict: exit 0 pass, 1 any problem, 2 could not run.

The server is stopped on every path out (the `finally`), including Ctrl-C and a failed phase.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import httpx

from .mix import KINDS, make_plan, make_specs
from .report import print_summary
from .runner import Run, mixed_phase, quiet_phase, reference_phase
from .server import Server, start, stop
from .warmup import server_slots, warmup_phase

__all__ = ["main", "parse_args"]

_EPILOG = "request kinds (mixed phase):\n" + "\n".join(f"  {k:15} {w:4.0%}  {what}" for k, (w, what) in KINDS.items())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="soak.py",
        description="Soak test of `onyxia serve`: mixed concurrent requests, each completed answer equal to "
        "the same request's answer alone; no 5xx, no leaked in-flight work, bounded RSS growth.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", nargs="?", help="model directory to serve (omit with --url)")
    parser.add_argument("--url", help="soak a server already running at this root URL instead of starting one")
    parser.add_argument("--pid", type=int, help="with --url: the server's process id, for the RSS check")
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="passed to `onyxia serve` (repeatable; write --server-arg=--parallel --server-arg=8)",
    )
    parser.add_argument("--api-key", default="soak", help="sent as 'Authorization: Bearer KEY'")
    parser.add_argument("--requests", type=int, default=2000, help="mixed-phase requests (default 2000)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the prompts, parameters and mix (default 0)")
    parser.add_argument("--specs", type=int, default=None, help="distinct requests (default requests/5, 8 to 200)")
    parser.add_argument("--max-rss-drift", type=float, default=5.0, help="percent RSS growth allowed (default 5)")
    parser.add_argument(
        "--slots", type=int, default=None, help="batch sizes the warm-up covers (default: the server's onyxia_slots)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one request may take (default 120)")
    parser.add_argument("--startup-timeout", type=float, default=600.0, help="seconds to wait for /health")
    parser.add_argument("--stop-timeout", type=float, default=30.0, help="seconds from SIGINT to SIGKILL")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds for in-flight gauges to reach 0")
    parser.add_argument("--long-words", type=int, default=80, help="words in a long prompt and the shared prefix")
    parser.add_argument("--too-long-tokens", type=int, default=65536, help="tokens of the too-long bad request")
    parser.add_argument("--log", type=Path, default=None, help="server log file (default: a temporary file)")
    args = parser.parse_args(argv)
    if (args.model is None) == (args.url is None):
        parser.error("give a MODEL directory to serve, or --url of a running server (not both)")
    if args.requests < 1 or args.clients < 1:
        parser.error("--requests and --clients must be at least 1")
    if args.slots is not None and args.slots < 1:
        parser.error("--slots must be at least 1")
    return args


def _served_model(url: str, api_key: str) -> str:
    models = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {api_key}"}, timeout=10).json()
    name: str = models["data"][0]["id"]
    return name


async def _phases(run: Run, args: argparse.Namespace) -> None:
    count = args.specs or min(200, max(8, args.requests // 5))
    specs = make_specs(count, args.seed, args.long_words)
    slots = args.slots or await asyncio.to_thread(server_slots, run.url, args.clients)
    print(
        f"soak: {len(specs)} specs alone first, a warm-up over batch sizes 1..{slots}, then {args.requests} mixed "
        "requests",
        file=sys.stderr,
    )
    await reference_phase(run, specs)
    await warmup_phase(run, specs, slots, args.clients, args.settle)
    await mixed_phase(run, make_plan(specs, args.requests, args.seed), args.clients)
    await quiet_phase(run, specs, args.settle)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.perf_counter()
    server: Server | None = None
    try:
        if args.url:
            server = Server(args.url.rstrip("/").removesuffix("/v1"), args.pid)
        else:
            print(f"soak: starting onyxia serve {args.model} {' '.join(args.server_arg)}", file=sys.stderr)
            server = start(args.model, args.server_arg, args.startup_timeout, args.log)
        model = _served_model(server.url, args.api_key)
        run = Run(server.url, model, server.pid, args.timeout, args.too_long_tokens, args.api_key)
        asyncio.run(_phases(run, args))
    except (RuntimeError, httpx.HTTPError) as e:
        print(f"soak: could not run: {e}", file=sys.stderr)
        if server is not None and server.log_tail():
            print(f"--- server log ({server.log}) ---\n{server.log_tail()}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            stop(server, args.stop_timeout)
    found = print_summary(run, args.max_rss_drift, server.stop_note, time.perf_counter() - began)
    if found and server.log is not None:
        print(f"server log: {server.log}")
    elif server.log is not None and args.log is None:
        server.log.unlink(missing_ok=True)  # a temporary log of a passing run says nothing
    return 1 if found else 0
