"""`Settings`: every ``ONYXIA_*`` environment variable, read once, in one typed place.

Each field names its variable, its type, its default and its meaning (docs/settings.md's table is checked
against `SETTINGS_DOC`). The environment is parsed the first time `settings()` is called; code
changes a value for a block with `override(check=True)` (a context variable, so threads and tests do
not leak into each other) or for the rest of the process with `configure(debug=1)`. The CLI's
global flags (``--debug``, ``--check``, ``--backend``) are an `override` around the command they run,
so an embedded `main()` leaves the process's settings alone. No other module reads ``os.environ`` for an ``ONYXIA_*`` name (`nox -s lint`
checks it).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onyxia.core.errors import OnyxiaError

__all__ = ["SETTINGS_DOC", "Settings", "SettingsError", "configure", "override", "reload", "settings"]

BINDING_ALIGNMENT = 256  # the smallest binding limit a plan can be split to (see onyxia.core.bindings)


class SettingsError(OnyxiaError):
    """An ``ONYXIA_*`` variable (or an override) holds a value of the wrong type or range."""


def _env(name: str, meaning: str) -> dict[str, str]:
    return {"env": name, "meaning": meaning}


@dataclass(frozen=True)
class Settings:
    """The switches and limits that change how Onyxia compiles and runs, with their defaults."""

    debug: int = field(
        default=0,
        metadata=_env("ONYXIA_DEBUG", "1: log every pass run at WARNING; 2: also every declined rewrite"),
    )
    check: bool = field(default=False, metadata=_env("ONYXIA_CHECK", "run `graph.check()` after every pass"))
    dump_ir: Path | None = field(
        default=None, metadata=_env("ONYXIA_DUMP_IR", "directory: write the graph text after every pass")
    )
    pass_stats: bool = field(
        default=False, metadata=_env("ONYXIA_PASS_STATS", "log the per-pass statistics table after each compile")
    )
    batch_passes: bool = field(
        default=True, metadata=_env("ONYXIA_BATCH_PASSES", "0: one compute pass per dispatch (no batching)")
    )
    share_buffers: bool = field(
        default=True, metadata=_env("ONYXIA_SHARE_BUFFERS", "0: every intermediate gets its own buffer")
    )
    max_binding_bytes: int | None = field(
        default=None,
        metadata=_env("ONYXIA_MAX_BINDING_BYTES", "split tensors over this many bytes per binding (default 128 MiB)"),
    )
    max_buffer_bytes: int | None = field(
        default=None,
        metadata=_env("ONYXIA_MAX_BUFFER_BYTES", "split weights over this many bytes per buffer (default 2 GiB - 256)"),
    )
    backend: str | None = field(
        default=None, metadata=_env("ONYXIA_BACKEND", "wgpu backend to request (vulkan, metal, dx12, gl)")
    )
    native_encode: bool = field(
        default=True, metadata=_env("ONYXIA_NATIVE_ENCODE", "0: encode through wgpu-py's public API only")
    )
    cache_dir: Path | None = field(
        default=None,
        metadata=_env("ONYXIA_CACHE_DIR", "cache for synthesized bench models and compiled plans (~/.cache/onyxia)"),
    )
    plan_cache: bool = field(
        default=True,
        metadata=_env("ONYXIA_PLAN_CACHE", "0: always parse and compile (no compiled-plan cache under <cache>/plans)"),
    )
    plan_cache_mb: int = field(
        default=4096,
        metadata=_env(
            "ONYXIA_PLAN_CACHE_MB", "size limit of the compiled-plan cache: least recently used plans go first"
        ),
    )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """Parse every variable that is set; an unset or empty one keeps its default."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            text = environ.get(f.metadata["env"], "").strip()
            if text:
                values[f.name] = _parse(f, text)
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with `changes` (field names), each checked as the environment's values are."""
        known = {f.name: f for f in dataclasses.fields(self)}
        for name, value in changes.items():
            if name not in known:
                raise SettingsError(f"unknown setting '{name}'; known: {', '.join(sorted(known))}")
            _validate(known[name], value)
        return dataclasses.replace(self, **changes)


SETTINGS_DOC: tuple[tuple[str, str, str, str], ...] = tuple(
    (f.metadata["env"], f.name, repr(f.default), f.metadata["meaning"]) for f in dataclasses.fields(Settings)
)
"""(variable, field, default, meaning) per setting: docs/settings.md's table."""


def _parse(f: dataclasses.Field[Any], text: str) -> Any:
    name, kind = f.metadata["env"], f.type
    try:
        if kind == "bool":
            if text not in ("0", "1"):
                raise ValueError("expected 0 or 1")
            value: Any = text == "1"
        elif kind in ("int", "int | None"):
            try:
                value = int(text, 0)
            except ValueError:
                raise ValueError("expected an integer (decimal, or 0x... for hex)") from None
        elif kind == "Path | None":
            value = Path(text)
        else:
            value = text
        _validate(f, value)
    except (ValueError, SettingsError) as e:
        raise SettingsError(f"environment variable {name}={text!r}: {e}") from None
    return value


def _validate(f: dataclasses.Field[Any], value: Any) -> None:
    kind = str(f.type)
    if value is None and "None" in kind:
        return
    expected: type[Any] = {"bool": bool, "int": int, "int | None": int, "Path | None": Path, "str | None": str}[kind]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise SettingsError(f"setting '{f.name}' must be {kind}, got {value!r}")
    if f.name == "debug" and value < 0:
        raise SettingsError(f"setting 'debug' must be >= 0, got {value}")
    if f.name in ("max_binding_bytes", "max_buffer_bytes") and value < BINDING_ALIGNMENT:
        raise SettingsError(f"setting '{f.name}' must be >= {BINDING_ALIGNMENT}, got {value}")


_from_environ: Settings | None = None
_configured: dict[str, Any] = {}
_override: ContextVar[Settings | None] = ContextVar("onyxia_settings", default=None)


def settings() -> Settings:
    """The settings in force: an `override` block's, else the environment's with `configure`'s changes."""
    current = _override.get()
    return current if current is not None else _base()


def configure(**changes: Any) -> Settings:
    """Change settings for the rest of the process (the CLI's flags); returns the new settings."""
    global _from_environ
    _from_environ = _base().replace(**changes)
    _configured.update(changes)
    return _from_environ


def reload() -> Settings:
    """Read the environment again (keeping `configure`'s changes): for tests that set variables."""
    global _from_environ
    _from_environ = None
    return _base()


@contextmanager
def override(**changes: Any) -> Iterator[Settings]:
    """Settings with `changes` inside the block, for this thread or task only."""
    token = _override.set(settings().replace(**changes))
    try:
        yield settings()
    finally:
        _override.reset(token)


def _base() -> Settings:
    global _from_environ
    if _from_environ is None:
        _from_environ = Settings.from_environ(os.environ).replace(**_configured)
    return _from_environ
