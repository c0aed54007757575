"""`--record PATH` for the report scripts: put measured rows into a docs figures file (docs/data/*.json).

The docs' tables, plots and the README's results table are rendered from those files
(docs/hooks/figures_tables.py); each entry carries its id (the model or pipeline), the date, the command
that measured it and the machine. Recording replaces the entries of the same ids where they stand and
keeps the rest, so a report run on a few names (`report.py NAME ...`) updates just those rows.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

__all__ = ["command_line", "machine", "record"]


def command_line() -> str:
    """This process's command as a user types it from the repository root."""
    return shlex.join(["python", *sys.argv])


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs"


def record(path: Path, entries: list[dict[str, Any]]) -> None:
    """Write `entries` (each with an "id") into the figures file at `path`, dated today with this command."""
    stamp = {"date": datetime.date.today().isoformat(), "command": command_line(), "machine": machine()}
    doc = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"runs": []}
    fresh = [{"id": e["id"], **stamp, **{k: v for k, v in e.items() if k != "id"}} for e in entries]
    new = {e["id"]: e for e in fresh}
    doc["runs"] = [new.pop(run["id"], run) for run in doc["runs"]] + list(new.values())  # in place, new ones last
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    temporary.replace(path)
