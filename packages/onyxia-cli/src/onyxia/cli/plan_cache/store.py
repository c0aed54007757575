"""The cache directory: one ``<key>.plan`` file per compiled plan, and a ``<key>.json`` note saying what it is.

Writers never leave a half-written entry: each writes a temporary file in the same directory and renames it
over the entry (`os.replace` is atomic on one file system), so two processes compiling the same model both
succeed and a reader sees one whole file or none. A reader trusts nothing it has not checked (`plan_io`:
header, length, checksums, the model's data files): an entry that fails is logged, deleted and compiled
again. A failure to write (a read-only or full disk) never fails the compile it would have saved.

The directory is bounded (`plan_cache_mb`, ONYXIA_PLAN_CACHE_MB): a hit touches its entry, and after each write
the least recently used entries go until the rest fit. Without it every edit of an editable install (the code's
files are part of the key) would leave another copy of each plan behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onyxia.core.plan import CompiledModel
from onyxia.core.plan_io import PlanFormatError, ReplannerFactory, read_plan, write_plan
from onyxia.core.settings import Settings

__all__ = ["STATS", "CacheStats", "Entry", "PlanStore", "plans_dir"]

log = logging.getLogger(__name__)


@dataclass
class CacheStats:
    """What this process's plan cache did: tests and benches read it (a hit skipped parse and compile)."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    rejected: int = 0  # entries found corrupted or stale, deleted and compiled again
    replans: int = 0  # cached plans whose lazy replanner had to parse and compile after all


STATS = CacheStats()


@dataclass(frozen=True)
class Entry:
    path: Path
    size: int
    note: dict[str, Any]  # the key's parts and when it was written ({} when the note is missing)


def plans_dir(config: Settings) -> Path:
    """``<cache>/plans``: the `cache_dir` setting (ONYXIA_CACHE_DIR), else ``$XDG_CACHE_HOME/onyxia``, else
    ``~/.cache/onyxia``."""
    if config.cache_dir is not None:
        return config.cache_dir / "plans"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "onyxia" / "plans"


class PlanStore:
    def __init__(self, root: Path, limit_bytes: int | None = None) -> None:
        self.root = root
        self.limit_bytes = limit_bytes  # None: unbounded (listing and clearing need no limit)

    def path(self, digest: str) -> Path:
        return self.root / f"{digest}.plan"

    def load(self, digest: str, replanner: ReplannerFactory | None = None) -> tuple[CompiledModel, Any] | None:
        """The plan and extras stored under `digest`; None when there is none or it cannot be trusted."""
        path = self.path(digest)
        try:
            found = read_plan(path, replanner)
            with contextlib.suppress(OSError):
                os.utime(path)  # used now: the last to be evicted
            return found
        except FileNotFoundError:
            return None
        except (PlanFormatError, OSError) as e:
            STATS.rejected += 1
            log.info("plan cache: ignoring %s (%s); compiling again", path.name, e)
            with contextlib.suppress(OSError):
                path.unlink()
            return None

    def save(
        self, digest: str, plan: CompiledModel, extras: Any, data_dir: Path | None, note: dict[str, Any]
    ) -> Path | None:
        """Store `plan` under `digest` (atomically); None when it could not be stored (logged, not raised)."""
        target, temporary = self.path(digest), None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.root, prefix=f".{digest}.", suffix=".tmp", delete=False) as f:
                temporary = Path(f.name)
                sources = write_plan(f, plan, extras, data_dir)
            os.replace(temporary, target)
            temporary = None
            note = {**note, "written": time.time(), "data_files": [str(p) for p in sources]}
            _write_atomic(self.root / f"{digest}.json", json.dumps(note, default=str, indent=1).encode())
        except PlanFormatError as e:
            log.info("plan cache: not storing this plan: %s", e)
            return None
        except OSError as e:
            log.warning("plan cache: cannot write %s: %s (the plan is used without being cached)", target, e)
            return None
        finally:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    temporary.unlink()
        STATS.writes += 1
        self.evict(keep=target)
        return target

    def evict(self, keep: Path | None = None) -> int:
        """Delete the least recently used entries (and their notes) until the rest fit `limit_bytes`; the entry
        `keep` (just written) stays even when it alone is larger. Returns how many were deleted."""
        if self.limit_bytes is None:
            return 0
        entries = sorted(self.entries(), key=lambda e: _mtime(e.path))
        total, deleted = sum(e.size for e in entries), 0
        for entry in entries:
            if total <= self.limit_bytes:
                break
            if entry.path == keep:
                continue
            with contextlib.suppress(OSError):
                entry.path.unlink()
                entry.path.with_suffix(".json").unlink(missing_ok=True)
                deleted += 1
            total -= entry.size
        if deleted:
            log.info(
                "plan cache: %d least recently used plan(s) deleted to stay under %d bytes", deleted, self.limit_bytes
            )
        return deleted

    def entries(self) -> list[Entry]:
        found = []
        for path in sorted(self.root.glob("*.plan")) if self.root.is_dir() else []:
            note: dict[str, Any] = {}
            with contextlib.suppress(OSError, ValueError):
                note = json.loads(path.with_suffix(".json").read_text())
            with contextlib.suppress(OSError):  # a concurrent clear may remove it meanwhile
                found.append(Entry(path, path.stat().st_size, note))
        return found

    def clear(self) -> tuple[int, int]:
        """Delete every entry, note, left-over temporary file and remembered model digest; returns (entries,
        bytes) removed."""
        count = size = 0
        shutil.rmtree(self.root / "digests", ignore_errors=True)
        for path in list(self.root.iterdir()) if self.root.is_dir() else []:
            if path.suffix in (".plan", ".json", ".tmp") and path.is_file():
                with contextlib.suppress(OSError):
                    length = path.stat().st_size
                    path.unlink()
                    count += path.suffix == ".plan"
                    size += length
        return count, size


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another process
        return 0.0


def _write_atomic(target: Path, data: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp", delete=False) as f:
        f.write(data)
    os.replace(f.name, target)
