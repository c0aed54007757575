"""One module per subcommand; each has `add_parser(subparsers)` and `run(args, console) -> int`."""

from onyxia.cli.commands import chat, generate, inspect, run, validate

COMMANDS = (inspect, validate, run, generate, chat)

__all__ = ["COMMANDS"]
