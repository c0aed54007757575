"""`onyxia generate [MODEL_DIR] --prompt TEXT`: stream a completion, then the speed figures.

Text goes to stdout as it is produced; the statistics (prompt tokens, prefill and decode tok/s,
adapter) go to stderr, or to stdout as one JSON object with ``--stats json``.
"""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console

from onyxia.cli.arguments import utf8_text
from onyxia.cli.commands.llm_options import add_llm_arguments, open_session, sampling_from
from onyxia.cli.console import plain, stderr_console
from onyxia.core import InputError

__all__ = ["add_parser", "run"]

NAME = "generate"
DEMO_PROMPT = "Life is"  # fortune-gemma3 writes fortune cookies; prompts should not end in a space


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(NAME, help="generate text from a prompt with an LLM directory")
    add_llm_arguments(parser)
    parser.add_argument(
        "--prompt", type=utf8_text, default=None, help=f"the prompt text (the demo model's default: {DEMO_PROMPT!r})"
    )
    parser.add_argument("--stats", choices=("text", "json"), default="text", help="how to report speed figures")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.prompt is None:
        if args.model_dir is not None:
            raise InputError("generate: --prompt is required with a MODEL_DIR (only the built-in demo has a default)")
        args.prompt = DEMO_PROMPT
    errors = stderr_console()
    session = open_session(args, errors)
    params = sampling_from(args)
    sys.stdout.write(args.prompt)
    for piece in session.generate(
        args.prompt,
        args.max_new_tokens,
        params.temperature,
        params.top_k,
        params.top_p,
        params.repetition_penalty,
        params.seed,
    ):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    stats = session.stats
    figures = {
        "prompt_tokens": stats.prompt_tokens,
        "new_tokens": stats.new_tokens,
        "prefill_tokens_per_second": round(stats.prefill_tokens_per_second, 2),
        "decode_tokens_per_second": round(stats.decode_tokens_per_second, 2),
        "adapter": session.adapter,
        "precision": session.model_dir.precision,
    }
    if args.stats == "json":
        print(json.dumps(figures))
    else:
        line = (
            f"{stats.prompt_tokens} prompt tokens, prefill {figures['prefill_tokens_per_second']} tok/s, "
            f"decode {figures['decode_tokens_per_second']} tok/s ({stats.new_tokens} tokens) on {session.adapter} "
            f"[{session.model_dir.precision}]"
        )
        errors.print(plain(line, "dim"))
    return 0
