"""`onyxia chat [MODEL_DIR]`: an interactive REPL over the tokenizer's chat template.

Each turn is rendered with the template and only the new text is prefilled: the KV cache keeps
the conversation, so a long chat does not get slower to answer. ``/reset`` starts over, ``/exit``
(or end of input) quits, Ctrl-C stops the current answer and keeps the program running.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from onyxia.cli.commands.llm_options import add_llm_arguments, open_session, sampling_from
from onyxia.cli.llm.chat import Conversation

__all__ = ["add_parser", "run"]

NAME = "chat"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(NAME, help="chat with an LLM directory (/reset, /exit)")
    add_llm_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    errors = Console(file=sys.stderr, highlight=False)
    conversation = Conversation(open_session(args, errors), sampling_from(args), args.max_new_tokens)
    errors.print("[dim]type a message; /reset starts over, /exit quits, Ctrl-C stops an answer[/]")
    while True:
        try:
            line = input("> ")
        except (EOFError, KeyboardInterrupt):
            sys.stdout.write("\n")
            return 0
        text = line.strip()
        if text == "/exit":
            return 0
        if text == "/reset":
            conversation.reset()
            errors.print("[dim]conversation reset[/]")
            continue
        if not text:
            continue
        try:
            for piece in conversation.say(text):
                sys.stdout.write(piece)
                sys.stdout.flush()
        except KeyboardInterrupt:
            conversation.interrupted()
            sys.stdout.write(" [stopped]")
        sys.stdout.write("\n")
