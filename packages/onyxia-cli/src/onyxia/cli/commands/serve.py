"""`onyxia serve [MODEL_DIR]`: an OpenAI-compatible server (chat and text completions, SSE streaming).

The sampling flags `generate` and `chat` take set the defaults for requests that leave a field out
(`--max-new-tokens` too: the default max_tokens). Needs the `serve` extra; without it the command
says how to install it instead of failing on an import.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from rich.console import Console

from onyxia.cli.arguments import non_negative_float, positive_int
from onyxia.cli.commands.llm_options import add_llm_arguments, open_session, sampling_from
from onyxia.cli.console import stderr_console
from onyxia.core import InputError

__all__ = ["DEFAULT_GATHER_MS", "DEFAULT_PARALLEL", "DEFAULT_PREFILL_CHUNK", "add_parser", "run"]

# Chosen by measurement (docs/serving/index.md, "Defaults"): 8 clients on 8 slots decode 3-4x one client's
# tokens/s with a p95 time to first token of a few seconds; on 4 slots the last 4 queue for whole answers
# (p95 11-14 s); a slot costs max_length x the KV bytes per position (72 MiB for Gemma 3 270m at 2048).
DEFAULT_PARALLEL = 8
# A running stream waits for one chunk's prefill per step. On a compute-bound adapter a prompt's prefill costs
# about the same per token at any chunk, so a newcomer's first token comes little later with smaller chunks
# while the others' stall shrinks with the chunk: 128 cuts 256's by a third for at most 13% more wait.
DEFAULT_PREFILL_CHUNK = 128
# An idle server starts once no request has arrived for this long, so clients starting together share a first run
# (serve/engine.py); a lone request waits it once. Measured in docs/serving/index.md, "Defaults".
DEFAULT_GATHER_MS = 3.0

NAME = "serve"
_NEEDS = ("fastapi", "uvicorn", "pydantic", "prometheus_client")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(NAME, help="serve an LLM directory over an OpenAI-compatible HTTP API")
    add_llm_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=positive_int, default=8000, help="port to listen on (default: 8000)")
    parser.add_argument(
        "--max-queue", type=positive_int, default=16, help="requests that may wait; more are answered 429"
    )
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on /v1/*")
    parser.add_argument(
        "--parallel",
        type=positive_int,
        default=DEFAULT_PARALLEL,
        help=f"sequences decoded together (slots), each with its own --max-length of KV cache, which the server "
        f"logs at start (default {DEFAULT_PARALLEL}; fewer where memory is short: docs/serving 'Defaults')",
    )
    parser.add_argument(
        "--prefill-chunk",
        type=positive_int,
        default=DEFAULT_PREFILL_CHUNK,
        help="prompt tokens a newcomer prefills per step while the others decode: the longest a running stream "
        f"waits between tokens, against the newcomer's time to first token (default {DEFAULT_PREFILL_CHUNK})",
    )
    parser.add_argument(
        "--gather-ms",
        type=_gather_ms,
        default=DEFAULT_GATHER_MS,
        help="when idle, start once no request has arrived for this long, so requests sent together start "
        f"together; a lone request waits it once (default {DEFAULT_GATHER_MS:g}; 0 starts at once)",
    )
    parser.add_argument(
        "--embedding-model",
        type=Path,
        default=None,
        metavar="DIR",
        help="also serve this sentence-transformers ONNX directory on /v1/embeddings",
    )
    parser.set_defaults(handler=run)


def _gather_ms(text: str) -> float:
    value = non_negative_float(text)
    if value > 1000:
        raise argparse.ArgumentTypeError(f"{value:g} ms is more than a second; expected 0 to 1000")
    return value


def run(args: argparse.Namespace, console: Console) -> int:
    missing = [name for name in _NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(
            f"serve: {', '.join(missing)} not installed; install the server's extra: pip install 'onyxia-cli[serve]'"
        )
    if args.port > 65535:
        raise InputError(f"serve: --port {args.port} is not a TCP port (1 to 65535)")
    import uvicorn

    from onyxia.cli.llm.cache_memory import kv_buffer_bytes
    from onyxia.cli.serve import create_app
    from onyxia.cli.serve.heap import fix_mmap_threshold
    from onyxia.cli.serve.requests import Defaults

    fix_mmap_threshold()  # a long-running process: transient peaks given back (serve/heap.py)
    errors = stderr_console()
    session = open_session(args, errors)
    defaults = Defaults(sampling_from(args), args.max_new_tokens)
    app = create_app(
        session=session,
        defaults=defaults,
        max_queue=args.max_queue,
        api_key=args.api_key,
        embedding_model=args.embedding_model,
        gather=args.gather_ms / 1000,
    )
    served = app.state.onyxia.model + (f" and {args.embedding_model.name}" if args.embedding_model else "")
    kv = kv_buffer_bytes(session) / 2**20
    errors.print(f"[dim]{session.slots} slots x {session.max_length} tokens: {kv:.0f} MiB of KV cache[/]")
    errors.print(f"[dim]serving {served} on http://{args.host}:{args.port} (Ctrl-C stops)[/]")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
