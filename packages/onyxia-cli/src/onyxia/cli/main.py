"""The `onyxia` console script: argument parsing, logging, and the one place errors are printed.

Every `OnyxiaError` ends here as one red ``error:`` line on stderr with no traceback: exit
status 2 for bad user input (`InputError`), 1 for anything else about the model. Any other
exception is a bug in Onyxia: one ``internal error:`` line (exit 1) with a hint to rerun with
``--debug 1``, which shows the traceback. The global flags
``--debug``, ``--check`` and ``--backend`` set the settings of the same names (`onyxia.core.settings`,
which ``ONYXIA_DEBUG``, ``ONYXIA_CHECK`` and ``ONYXIA_BACKEND`` set otherwise) for the command they
run, as an `override`, so an embedded `main()` leaves the process's settings as they were.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from onyxia.cli.commands import COMMANDS
from onyxia.cli.console import make_console
from onyxia.core import InputError, OnyxiaError
from onyxia.core.settings import override, settings

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onyxia", description="Compile ONNX models to WebGPU compute shaders and run them."
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log passes (-v) or nodes (-vv)")
    parser.add_argument(
        "--debug",
        type=int,
        default=None,
        metavar="LEVEL",
        help="1: log every pass run; 2: also declined rewrites",
    )
    parser.add_argument("--check", action="store_true", default=None, help="check the graph after every pass")
    parser.add_argument("--backend", default=None, help="wgpu backend to use (vulkan, metal, dx12, gl)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # the command line as given (a caller's list, not the process's), for `bench --record`
    console = make_console(sys.stdout)
    errors = make_console(sys.stderr)
    _configure_logging(args.verbose, errors)
    try:
        with override(**_settings_from_flags(args)), warnings.catch_warnings():
            warnings.showwarning = _log_warning
            status: int = args.handler(args, console)
        return status
    except InputError as e:
        _print_error(errors, e, _debug(args))
        return 2
    except OnyxiaError as e:
        _print_error(errors, e, _debug(args))
        return 1
    except KeyboardInterrupt:
        errors.print("[red]interrupted[/]")
        return 130
    except Exception as e:  # a bug, not a user error: one line unless --debug asks for the traceback
        if _debug(args):
            errors.print_exception()
        message = " ".join(str(e).split())[:300]
        errors.print(
            f"[bold red]internal error:[/] [red]{escape(type(e).__name__)}{': ' if message else ''}"
            f"{escape(message)}[/] [dim](a bug in Onyxia; rerun with --debug 1 for the traceback)[/]"
        )
        return 1


def _settings_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the global flags give; a flag left out keeps the environment's value."""
    flags = {"debug": args.debug, "check": args.check, "backend": args.backend}
    return {name: value for name, value in flags.items() if value is not None}


def _debug(args: argparse.Namespace) -> int:
    return int(args.debug) if args.debug is not None else settings().debug


def _print_error(console: Console, error: OnyxiaError, debug: int) -> None:
    """The message (the model's terms); the compiler pass that raised it only with --debug."""
    first, *rest = (str(error) or type(error).__name__).splitlines() or [""]
    console.print(f"[bold red]error:[/] [red]{escape(first)}[/]")
    where = [error.compiler_pass] if error.compiler_pass and debug >= 1 else []
    for line in [*rest, *getattr(error, "__notes__", []), *where]:
        console.print(escape(line), style="dim")


def _configure_logging(verbosity: int, console: Console) -> None:
    """Only the `onyxia` logger is configured, so embedding `main()` leaves the root logger alone."""
    logger = logging.getLogger("onyxia")
    logger.setLevel(logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG)
    handler = RichHandler(console=console, show_time=False, show_path=False)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger.handlers = [handler]


def _log_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """Warnings (a plan's float64 demotion, say) print as one ``onyxia:`` log line, not Python's file:line form;
    `catch_warnings` in `main` puts the usual display back, so an embedded `main()` changes nothing."""
    logging.getLogger("onyxia").warning("%s: %s", category.__name__, message)


def _version() -> str:
    from onyxia.cli._version import __version__

    return __version__
