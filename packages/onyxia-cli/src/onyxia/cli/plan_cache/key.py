"""The key of a cached plan: everything a compile's result depends on, hashed.

A plan is a function of the model's bytes, the dims fixed at compile time, the passes that ran (an LLM
session adds its generation passes and options), the device it was compiled for (`AdapterFacts`, from which
the variant tables pick kernels, and the binding and buffer limits planning splits weights by), the settings
in force, the operator plugins installed, and Onyxia's code. All of them go into the key, so a changed one
is a miss, never a stale plan:

- the model: the sha256 of its bytes and, for a file, its folder and its external data files' sizes and
  mtimes (`model_parts`; `plan_io` checks again the data files a plan refers to when it reads the plan);
- Onyxia's code: the six distributions' versions and the size and mtime of every module and WGSL file under
  the ``onyxia`` namespace, since an editable install keeps its version while its kernels change (a few ms).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from onyxia.core.adapter_facts import (
    AdapterFacts,
    _forced,  # force_variants' table: it changes kernels as facts do
    adapter_facts,
)
from onyxia.core.plan_io import FORMAT
from onyxia.core.registry import ENTRY_POINT_GROUP
from onyxia.core.settings import Settings

__all__ = [
    "DISTRIBUTIONS",
    "PlanKey",
    "code_fingerprint",
    "model_digest",
    "model_parts",
    "pass_description",
    "plan_key",
]

DISTRIBUTIONS = ("onyxia-core", "onyxia-onnx", "onyxia-compiler", "onyxia-operators", "onyxia-runtime", "onyxia-cli")
# settings that say where the cache is, or only how runs are encoded, never change a plan
_NOT_PLAN_SETTINGS = frozenset(
    {"cache_dir", "plan_cache", "plan_cache_mb", "native_encode", "backend", "debug", "pass_stats"}
)
_CODE_SUFFIXES = (".py", ".wgsl", ".json")


@dataclass(frozen=True)
class PlanKey:
    """`digest` names the cache entry; `parts` is what was hashed (shown by ``onyxia cache info``)."""

    digest: str
    parts: dict[str, Any]


def model_digest(source: Path | bytes, memo: Path | None = None) -> tuple[str, list[str]]:
    """sha256 of the model's bytes, and the names of the files beside it that the bytes name (its external
    data: looked for only when the key "location" of `TensorProto.external_data` occurs).

    With `memo` (a folder), both are remembered under the file's path, size, mtime and inode, so a second
    process does not read and hash a 50 MB model again (ccache's rule: a rewrite changes one of the four)."""
    if isinstance(source, bytes):
        return hashlib.sha256(source).hexdigest(), []
    stat, real = source.stat(), os.path.realpath(source)
    identity = [real, stat.st_size, stat.st_mtime_ns, stat.st_ino]
    note = memo / (hashlib.sha256(real.encode()).hexdigest()[:32] + ".json") if memo is not None else None
    if note is not None:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            known = json.loads(note.read_text())
            if known["identity"] == identity:
                return str(known["digest"]), [str(n) for n in known["names"]]
    data = source.read_bytes()
    digest, names = hashlib.sha256(data).hexdigest(), []
    if b"location" in data:
        with os.scandir(source.parent) as entries:
            names = sorted(e.name for e in entries if e.name != source.name and e.is_file() and e.name.encode() in data)
    if note is not None:
        with contextlib.suppress(OSError):
            note.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=note.parent, suffix=".tmp", delete=False) as f:
                json.dump({"identity": identity, "digest": digest, "names": names}, f)
            os.replace(f.name, note)
    return digest, names


def model_parts(source: Path | bytes, memo: Path | None = None) -> dict[str, Any]:
    """The model's part of the key: its bytes' digest and, for a file, its folder and the size and mtime of
    each external data file it names (a data file rewritten under the same name, as a new seed of a
    synthesized model is, changes the key)."""
    digest, names = model_digest(source, memo)
    if isinstance(source, bytes):
        return {"model": digest, "folder": "", "label": "<bytes>", "data_files": {}}
    files = {}
    for name in names:
        with contextlib.suppress(OSError):
            stat = (source.parent / name).stat()
            files[name] = [stat.st_size, stat.st_mtime_ns]
    return {"model": digest, "folder": os.path.realpath(source.parent), "label": source.name, "data_files": files}


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Onyxia's versions and the size and mtime of each of its code files: changes whenever its code does."""
    import onyxia

    digest = hashlib.sha256()
    for dist in DISTRIBUTIONS:
        try:
            digest.update(f"{dist}={importlib.metadata.version(dist)};".encode())
        except importlib.metadata.PackageNotFoundError:
            digest.update(f"{dist}=absent;".encode())
    for root in sorted(set(onyxia.__path__)):
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(_CODE_SUFFIXES):
                    stat = os.stat(os.path.join(folder, name))
                    digest.update(f"{os.path.relpath(folder, root)}/{name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


@lru_cache(maxsize=1)
def _plugins() -> tuple[str, ...]:
    """Installed operator plugins (entry point, distribution and version): a plugin can change a kernel."""
    found = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist
        found.append(f"{ep.name}={ep.value}@{dist.name if dist else '?'}-{dist.version if dist else '?'}")
    return tuple(sorted(found))


def pass_description(passes: Iterable[object]) -> list[str]:
    """Each extra pass as its class and simple configuration (a pass may say `cache_key` itself)."""
    described = []
    for p in passes:
        own = getattr(p, "cache_key", None)
        if isinstance(own, str):
            described.append(own)
            continue
        fields = {k: v for k, v in sorted(vars(p).items()) if _is_simple(v)} if hasattr(p, "__dict__") else {}
        described.append(f"{type(p).__module__}.{type(p).__qualname__}{json.dumps(fields, default=str)}")
    return described


def _is_simple(value: object) -> bool:
    if isinstance(value, (str, int, float, bool, type(None))):
        return True
    if isinstance(value, (tuple, list, frozenset)):
        return all(_is_simple(v) for v in value)
    if isinstance(value, dict):
        return all(_is_simple(k) and _is_simple(v) for k, v in value.items())
    return False


def plan_key(
    model: Path | bytes,
    dims: Mapping[str, int],
    config: Settings,
    *,
    passes: Sequence[str] = (),
    extra: Mapping[str, object] | None = None,
    facts: AdapterFacts | None = None,
    memo: Path | None = None,
) -> PlanKey:
    """The key of compiling `model` at `dims` under `config` (taken inside `compiling_for(runtime)`, so it
    holds the device's limits) for the adapter `facts` (default: the compile's current target). `memo`: where
    model digests are remembered (`model_digest`)."""
    facts = facts or adapter_facts()
    parts: dict[str, Any] = {
        **model_parts(model, memo),
        "dims": dict(sorted(dims.items())),
        "passes": list(passes),
        "extra": {k: str(v) for k, v in sorted((extra or {}).items())},
        "adapter": {k: v for k, v in dataclasses.asdict(facts).items() if k != "name"},  # the name: messages only
        "forced_variants": dict(_forced.get() or {}),
        "settings": {
            f.name: str(getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in _NOT_PLAN_SETTINGS
        },
        "plugins": list(_plugins()),
        "code": code_fingerprint(),
        "format": FORMAT,
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return PlanKey(hashlib.sha256(text.encode()).hexdigest()[:40], parts)
