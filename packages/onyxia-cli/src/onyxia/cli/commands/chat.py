"""`onyxia chat [MODEL_DIR]`: an interactive REPL over the tokenizer's chat template.

Each turn is rendered with the template and only the new text is prefilled: the KV cache keeps
the conversation, so a long chat does not get slower to answer. ``/reset`` starts over, ``/exit``
(or end of input) quits, Ctrl-C stops the current answer and keeps the program running. A turn
that cannot be answered (a line that is not UTF-8, a message too long for ``--max-length``) prints
one error line and the chat reads on; older turns are dropped when the conversation outgrows it.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.markup import escape

from onyxia.cli.commands.llm_options import add_llm_arguments, open_session, sampling_from
from onyxia.cli.console import stderr_console
from onyxia.cli.llm.chat import Conversation
from onyxia.core import OnyxiaError

__all__ = ["add_parser", "run"]

NAME = "chat"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(NAME, help="chat with an LLM directory (/reset, /exit)")
    add_llm_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    errors = stderr_console()
    if hasattr(sys.stdin, "reconfigure"):  # a bad byte must cost one line, not the rest of the input
        sys.stdin.reconfigure(errors="surrogateescape")
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
        dropped = conversation.dropped
        try:
            for piece in conversation.say(text):
                sys.stdout.write(piece)
                sys.stdout.flush()
        except KeyboardInterrupt:
            conversation.interrupted()
            sys.stdout.write(" [stopped]")
        except OnyxiaError as e:
            errors.print(f"[bold red]error:[/] [red]{escape(str(e))}[/]")
            continue
        sys.stdout.write("\n")
        if conversation.dropped > dropped:
            errors.print(f"[dim]dropped {conversation.dropped - dropped} earlier message(s) to fit --max-length[/]")
