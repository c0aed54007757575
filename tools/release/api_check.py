"""The check of each distribution's public API against its last release's snapshot (``nox -s api``).

The public API is the ``__all__`` of the modules in `snapshot.PUBLIC_MODULES`. At a release
(docs/releasing.md) ``python tools/release/api_check.py snapshot onyxia-core`` writes
``packages/onyxia-core/api/<version>.json`` (`snapshot.py`); the snapshots are committed, so a clone
without the release tags still has what the check reads.

The rule that ``nox -s api`` enforces, per distribution:

1. Every module in `PUBLIC_MODULES` states ``__all__`` and every name in it resolves.
2. Let S be the snapshot with the highest version in ``<project>/api/`` (none: nothing to compare).
   The version in ``_version.py`` must not be lower than S's.
3. ``griffe.find_breaking_changes`` runs from each public module of S to the same module of the
   current sources. Each breakage (a removed public name, a removed or re-ordered parameter, a
   parameter made required or of another kind, a changed default, a removed base class, a changed
   kind of object, ...) gets its *public path*: the module users import it from, the exported name,
   then any member names (``onyxia.core.OperatorRegistry.register``).
4. A breakage is announced when the ``### Breaking`` group of ``## [Unreleased]`` in the
   distribution's CHANGELOG.md names, in backticks, its public path or a prefix of it that still
   includes the exported name (``onyxia.core.OperatorRegistry`` covers all of that class's members;
   ``onyxia.core`` covers nothing). A breakage found under a module path that no public name maps to
   (a base class kept private) is announced by naming that path.
5. The check fails when any breakage is not announced, listing each with griffe's explanation.

Additions are never breaking. Once released, the announcement moves under the new version's heading
and the new snapshot becomes S, so the check starts again from an empty "Unreleased".
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: its siblings are modules
from changelog import announced_breaking
from snapshot import (
    PUBLIC_MODULES,
    ROOT,
    current_version,
    default_packages,
    default_search_paths,
    exports,
    latest_snapshot,
    load_snapshot,
    load_sources,
    project_dir,
    reachable,
    version_key,
    write_snapshots,
)

__all__ = ["PUBLIC_MODULES", "Breaking", "check", "find_breaking", "main", "unannounced", "write_snapshots"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Breaking:
    """One breaking change: the public paths it is known by, and griffe's one-line explanation."""

    paths: tuple[str, ...]
    explanation: str

    def announced_by(self, announced: Iterable[str]) -> bool:
        names = set(announced)
        return any(prefix in names for path in self.paths for prefix in _covering_prefixes(path))


def _public_names(collection: griffe.ModulesCollection, public: Sequence[str]) -> dict[str, str]:
    """Canonical path of each exported object -> the public path it is exported as (first module wins)."""
    names: dict[str, str] = {}
    for module_path in public:
        try:
            module, exported = exports(collection, module_path)
        except KeyError:
            continue
        for name in exported:
            member = module.members.get(name)
            if member is None:
                continue
            try:
                canonical = member.final_target.path if isinstance(member, griffe.Alias) else member.path
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                canonical = member.path
            names.setdefault(canonical, f"{module_path}.{name}")
            names.setdefault(member.path, f"{module_path}.{name}")
    return names


def _public_paths(path: str, names: Mapping[str, str]) -> tuple[str, ...]:
    """`path` re-rooted at the public name of its longest exported ancestor, and `path` itself."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in names:
            return (".".join([names[prefix], *parts[cut:]]), path)
    return (path,)


def _covering_prefixes(path: str) -> list[str]:
    """Announcements that cover `path`: itself and its ancestors down to the exported name (never a module)."""
    parts = path.split(".")
    return [".".join(parts[:cut]) for cut in range(len(parts), 0, -1) if not _is_module_path(".".join(parts[:cut]))]


def _is_module_path(path: str) -> bool:
    return path in {m for modules in PUBLIC_MODULES.values() for m in modules} or path in ("onyxia",)


def find_breaking(dist: str, old: griffe.ModulesCollection, new: griffe.ModulesCollection) -> list[Breaking]:
    """griffe's breakages from each public module of `old` to `new`, each under its public paths."""
    public = PUBLIC_MODULES[dist]
    names = {**_public_names(old, public), **_public_names(new, public)}
    found: dict[str, Breaking] = {}
    for module_path in public:
        old_module = old.get_member(module_path)
        try:
            new_module = new.get_member(module_path)
        except KeyError:
            found[module_path] = Breaking((module_path,), f"{module_path}: public module removed")
            continue
        for breakage in griffe.find_breaking_changes(old_module, new_module):
            explanation = _ANSI.sub("", breakage.explain())  # griffe colours its one-line style
            paths = _public_paths(breakage.obj.path, names)
            found.setdefault(explanation, Breaking(paths, explanation))
    return list(found.values())


def unannounced(breaking: Iterable[Breaking], changelog: Path) -> list[Breaking]:
    announced = announced_breaking(changelog)
    return [b for b in breaking if not b.announced_by(announced)]


def check(dists: Sequence[str], root: Path = ROOT) -> list[str]:
    """The rule of the module docstring for `dists`; returns the failures (empty: the check passes)."""
    search_paths = default_search_paths(root)
    current = load_sources(search_paths, default_packages(search_paths))
    failures = []
    for dist in dists:
        project = project_dir(dist, root)
        for module_path in PUBLIC_MODULES[dist]:
            reachable(current, [module_path])  # __all__ stated and resolvable
        snapshot = latest_snapshot(project)
        if snapshot is None:
            print(f"{dist}: no API snapshot in {project / 'api'}: nothing released to compare with")
            continue
        version = current_version(project)
        if version_key(version) < version_key(snapshot.stem):
            failures.append(f"{dist}: version {version} is lower than the last release's snapshot {snapshot.name}")
            continue
        breaking = find_breaking(dist, load_snapshot(snapshot), current)
        missing = unannounced(breaking, project / "CHANGELOG.md")
        print(f"{dist} {version} against {snapshot.name}: {len(breaking)} breaking, {len(missing)} not announced")
        failures += [
            f"{dist}: {b.explanation}\n    announce it under '### Breaking' in '## [Unreleased]' of "
            f"{(project / 'CHANGELOG.md').relative_to(root)}, naming `{b.paths[0]}`"
            for b in missing
        ]
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["check", "snapshot"])
    parser.add_argument("dists", nargs="*", help="distributions (default: all of PUBLIC_MODULES)")
    parser.add_argument("--force", action="store_true", help="snapshot: overwrite an existing file")
    args = parser.parse_args(argv)
    dists = args.dists or list(PUBLIC_MODULES)
    if args.command == "check":
        failures = check(dists)
        for failure in failures:
            print(f"BREAKING, not announced: {failure}", file=sys.stderr)
        return 1 if failures else 0
    for out in write_snapshots(dists, force=args.force):
        print(f"wrote {out.relative_to(ROOT)} ({out.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
