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

from onyxia.cli.arguments import positive_int
from onyxia.cli.commands.llm_options import add_llm_arguments, open_session, sampling_from
from onyxia.cli.console import stderr_console
from onyxia.core import InputError

__all__ = ["DEFAULT_PARALLEL", "add_parser", "run"]

DEFAULT_PARALLEL = 4

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
        help=f"sequences decoded together, each with its own --max-length of KV cache (default {DEFAULT_PARALLEL})",
    )
    parser.add_argument(
        "--prefill-chunk",
        type=positive_int,
        default=None,
        help="prompt tokens a newcomer prefills per step while the others decode (default: the session's, 256)",
    )
    parser.add_argument(
        "--embedding-model",
        type=Path,
        default=None,
        metavar="DIR",
        help="also serve this sentence-transformers ONNX directory on /v1/embeddings",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    missing = [name for name in _NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise InputError(
            f"serve: {', '.join(missing)} not installed; install the server's extra: pip install 'onyxia-cli[serve]'"
        )
    if args.port > 65535:
        raise InputError(f"serve: --port {args.port} is not a TCP port (1 to 65535)")
    import uvicorn

    from onyxia.cli.serve import create_app
    from onyxia.cli.serve.requests import Defaults

    errors = stderr_console()
    session = open_session(args, errors)
    defaults = Defaults(sampling_from(args), args.max_new_tokens)
    app = create_app(
        session=session,
        defaults=defaults,
        max_queue=args.max_queue,
        api_key=args.api_key,
        embedding_model=args.embedding_model,
    )
    served = app.state.onyxia.model + (f" and {args.embedding_model.name}" if args.embedding_model else "")
    errors.print(f"[dim]serving {served} on http://{args.host}:{args.port} (Ctrl-C stops)[/]")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
