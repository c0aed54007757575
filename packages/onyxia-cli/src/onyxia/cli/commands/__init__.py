"""One module per subcommand; each has `add_parser(subparsers)` and `run(args, console) -> int`."""

from onyxia.cli.commands import (
    bench,
    cache,
    chat,
    compare,
    compile,
    embed,
    generate,
    inspect,
    ops,
    run,
    serve,
    validate,
)

COMMANDS = (inspect, validate, compile, run, compare, generate, chat, embed, serve, bench, cache, ops)

__all__ = ["COMMANDS"]
