"""The one place a rich `Console` is built, for stdout and stderr alike, in every command.

Off a terminal, tables get a wide page and prose lines are never broken (``soft_wrap``), so scripts
can grep them; markup is for the program's own styling only, so data (paths, adapter names, the
``[fp32]`` precision tag) goes through `plain` and square brackets survive.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console
from rich.text import Text

__all__ = ["PIPE_WIDTH", "make_console", "plain", "stderr_console"]

PIPE_WIDTH = 160  # rich falls back to 80 columns off a terminal, which wraps the tables


def make_console(stream: TextIO) -> Console:
    if stream.isatty():
        return Console(file=stream, highlight=False)
    return Console(file=stream, width=PIPE_WIDTH, soft_wrap=True, highlight=False)


def stderr_console() -> Console:
    """Resolved at call time, so pytest's capture (which swaps `sys.stderr`) sees the output."""
    return make_console(sys.stderr)


def plain(text: str, style: str = "") -> Text:
    """`text` printed as is: no markup parsing, optionally in one style."""
    return Text(text, style=style)
