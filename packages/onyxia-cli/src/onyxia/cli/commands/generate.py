"""`onyxia generate [MODEL_DIR] --prompt TEXT`: stream a completion, then the speed figures.

Text goes to stdout as it is produced; the statistics (prompt tokens, prefill and decode tok/s,
adapter) go to stderr, or to stdout as one JSON object with ``--stats json``.

``--json-schema FILE``, ``--regex R`` or ``--grammar FILE`` (a Lark grammar in llguidance's dialect) constrain
the answer (`onyxia.cli.llm.constraints`); a file or pattern llguidance rejects is an error before generating.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from onyxia.cli.arguments import utf8_text
from onyxia.cli.commands.llm_options import add_llm_arguments, open_session, sampling_from
from onyxia.cli.console import plain, stderr_console
from onyxia.cli.llm.constraints import Constraint, grammar_tokenizer
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
    constrain = parser.add_mutually_exclusive_group()
    constrain.add_argument("--json-schema", type=Path, default=None, help="answer as JSON following this schema file")
    constrain.add_argument("--regex", type=utf8_text, default=None, help="answer matching this regular expression")
    constrain.add_argument("--grammar", type=Path, default=None, help="answer following this Lark grammar file")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.prompt is None:
        if args.model_dir is not None:
            raise InputError("generate: --prompt is required with a MODEL_DIR (only the built-in demo has a default)")
        args.prompt = DEMO_PROMPT
    constraint = _constraint(args)  # a bad file fails before the model loads
    errors = stderr_console()
    session = open_session(args, errors)
    params = sampling_from(args)
    if constraint is not None:  # llguidance's verdict before any output
        constraint.check(grammar_tokenizer(session))
    sys.stdout.write(args.prompt)
    ids = session.tokenizer.encode(args.prompt)
    stops = session.model_dir.eos_token_ids
    for piece in session.stream_text(ids, args.max_new_tokens, params, stops, [], constraint):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    stats = session.stats
    figures = {
        "prompt_tokens": stats.prompt_tokens,
        "new_tokens": stats.new_tokens,
        "forced_tokens": stats.forced_tokens,
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


def _constraint(args: argparse.Namespace) -> Constraint | None:
    if args.regex is not None:
        return Constraint.regex(args.regex)
    path = args.json_schema or args.grammar
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read it ({e})") from None
    if args.grammar is not None:
        return Constraint.lark(text)
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None
    return Constraint.json_schema(schema)
