"""One module per subcommand; each has `add_parser(subparsers)` and `run(args, console) -> int`."""

from onyxia.cli.commands import inspect, run, validate

COMMANDS = (inspect, validate, run)

__all__ = ["COMMANDS"]
