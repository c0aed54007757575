"""`onyxia cache info|clear`: what the compiled-plan cache holds, and emptying it.

``info`` prints the directory (the `cache_dir` setting's ``plans/``), whether the cache is on
(``ONYXIA_PLAN_CACHE``), and one row per entry: the model it was compiled from, its dims, size and age.
``clear`` deletes every entry (plans are compiled again on their next load) and says how much it freed.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from onyxia.cli.common import format_bytes
from onyxia.cli.plan_cache import PlanStore, cache_enabled, plans_dir
from onyxia.core.settings import settings

__all__ = ["add_parser", "run"]

NAME = "cache"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(NAME, help="show or clear the compiled-plan cache")
    parser.add_argument("action", choices=("info", "clear"), help="info: list the cached plans; clear: delete them")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    store = PlanStore(plans_dir(settings()))
    if args.action == "clear":
        count, size = store.clear()
        console.print(f"removed {count} cached plan(s), {format_bytes(size)}, from {escape(str(store.root))}")
        return 0
    entries = store.entries()
    state = "on" if cache_enabled() else "off (ONYXIA_PLAN_CACHE=0, ONYXIA_CHECK or ONYXIA_DUMP_IR)"
    total = sum(e.size for e in entries)
    console.print(f"plan cache: {escape(str(store.root))} ({state})")
    console.print(f"{len(entries)} plan(s), {format_bytes(total)}")
    if entries:
        table = Table(title_justify="left")
        for column in ("model", "folder", "dims", "size", "age", "entry"):
            table.add_column(column, overflow="fold")
        now = time.time()
        for entry in entries:
            key = entry.note.get("key", {})
            dims = ", ".join(f"{k}={v}" for k, v in key.get("dims", {}).items()) or "-"
            written = entry.note.get("written")
            age = _age(now - written) if isinstance(written, (int, float)) else "?"
            table.add_row(
                escape(str(key.get("label", "?"))),
                escape(str(key.get("folder", "")) or "-"),
                escape(dims),
                format_bytes(entry.size),
                age,
                entry.path.stem[:12],
            )
        console.print(table)
    return 0


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{max(seconds, 0):.0f} s"
