"""Public API snapshots per distribution, and the check of the current code against the last release's.

The public API of a distribution is the ``__all__`` of each module in `PUBLIC_MODULES` (its top
package and the subpackages users import from); everything else is internal, however it is named.
At a release (docs/releasing.md) ``python tools/release/api_check.py snapshot onyxia-core`` writes
``packages/onyxia-core/api/<version>.json``: griffe's JSON dump of those modules, pruned to what their
exports reach (the exported objects, their members, their base classes) and without docstrings. The
snapshots are committed, so a clone without tags still has what the check reads.

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
import contextlib
import json
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from changelog import announced_breaking

__all__ = [
    "PUBLIC_MODULES",
    "Breaking",
    "check",
    "current_version",
    "find_breaking",
    "latest_snapshot",
    "load_snapshot",
    "load_sources",
    "make_snapshot",
    "unannounced",
    "write_snapshots",
]

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_MODULES: dict[str, tuple[str, ...]] = {
    "onyxia-core": ("onyxia.core", "onyxia.core.rewrite"),
    "onyxia-onnx": ("onyxia.onnx",),
    "onyxia-compiler": ("onyxia.compiler", "onyxia.compiler.passes"),
    "onyxia-operators": ("onyxia.operators", "onyxia.operators.passes"),
    "onyxia-runtime": ("onyxia.runtime",),
    "onyxia-cli": ("onyxia.cli", "onyxia.cli.llm", "onyxia.cli.serve", "onyxia.ort"),
    "onyxia-example-ops": ("onyxia_example_ops",),
}
_DROPPED_KEYS = {"docstring", "filepath", "imports", "git_info", "source_link"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.M)


@dataclass(frozen=True)
class Breaking:
    """One breaking change: the public paths it is known by, and griffe's one-line explanation."""

    paths: tuple[str, ...]
    explanation: str

    def announced_by(self, announced: Iterable[str]) -> bool:
        names = set(announced)
        return any(prefix in names for path in self.paths for prefix in _covering_prefixes(path))


def project_dir(dist: str, root: Path = ROOT) -> Path:
    for folder in ("packages", "examples"):
        if (root / folder / dist / "pyproject.toml").is_file():
            return root / folder / dist
    raise SystemExit(f"{dist}: no packages/{dist} or examples/{dist} with a pyproject.toml under {root}")


def current_version(project: Path) -> str:
    """The version from the file ``[tool.hatch.version] path`` names (the one place it is written)."""
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    path = project / pyproject["tool"]["hatch"]["version"]["path"]
    match = _VERSION.search(path.read_text())
    if match is None:
        raise SystemExit(f"{path}: no __version__ = '...' line")
    return match.group(1)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def latest_snapshot(project: Path) -> Path | None:
    snapshots = sorted((project / "api").glob("*.json"), key=lambda p: _version_key(p.stem))
    return snapshots[-1] if snapshots else None


def load_sources(search_paths: Sequence[Path], packages: Iterable[str]) -> griffe.ModulesCollection:
    """Static analysis of `packages` (top packages, e.g. ``onyxia.core``) found on `search_paths`."""
    loader = griffe.GriffeLoader(search_paths=[str(p) for p in search_paths], docstring_parser=None)
    for package in packages:
        loader.load(package)
    loader.resolve_aliases(implicit=False, external=False)
    return loader.modules_collection


def default_search_paths(root: Path = ROOT) -> list[Path]:
    return sorted(root.glob("packages/*/src")) + sorted(root.glob("examples/*/src"))


def default_packages(search_paths: Sequence[Path]) -> list[str]:
    """Every top package under the src folders: ``onyxia.<name>`` for the namespace, else the folder."""
    found = []
    for src in search_paths:
        for child in sorted(src.iterdir()):
            if child.name == "onyxia":
                found += [f"onyxia.{p.name}" for p in sorted(child.iterdir()) if (p / "__init__.py").is_file()]
            elif (child / "__init__.py").is_file():
                found.append(child.name)
    return found


def _exports(collection: griffe.ModulesCollection, module_path: str) -> tuple[griffe.Module, list[str]]:
    module = collection.get_member(module_path)
    if module.exports is None:
        raise SystemExit(f"{module_path}: a public module must state __all__")
    return module, [str(name) for name in module.exports]


def _reachable(collection: griffe.ModulesCollection, public: Sequence[str]) -> set[str]:
    """Paths the public modules' exports reach: aliases, their targets, and base classes."""
    needed: set[str] = set(public)
    stack: list[Any] = []
    for module_path in public:
        module, names = _exports(collection, module_path)
        for name in names:
            if name not in module.members:
                raise SystemExit(f"{module_path}.__all__ names {name!r}, which the module does not define")
            stack.append(module.members[name])
    while stack:
        obj = stack.pop()
        if obj.path in needed and not obj.is_alias:
            continue
        needed.add(obj.path)
        if obj.is_alias:
            # a name from outside the analysed sources (numpy, onnx) has nothing of ours to keep
            with contextlib.suppress(griffe.AliasResolutionError, griffe.CyclicAliasError):
                stack.append(obj.final_target)
        elif obj.is_class:
            stack.extend(base for base in obj.resolved_bases if base.path not in needed)
    return needed


def _prune(node: dict[str, Any], path: str, needed: set[str]) -> dict[str, Any]:
    """`node` (a griffe JSON object at `path`) keeping needed objects whole and the modules on their way."""
    node = {k: v for k, v in node.items() if k not in _DROPPED_KEYS}
    members = node.get("members")
    if not isinstance(members, dict):
        return node
    keep_all = path in needed and node.get("kind") in ("class", "function")
    kept = {}
    for name, child in members.items():
        child_path = f"{path}.{name}"
        inside = keep_all or child_path in needed or any(n.startswith(child_path + ".") for n in needed)
        if inside:
            kept[name] = _prune(child, child_path, needed if not keep_all else needed | {child_path})
    node["members"] = kept
    return node


def make_snapshot(dist: str, collection: griffe.ModulesCollection) -> dict[str, Any]:
    """The JSON document for `dist`: version-independent griffe dumps of the roots the public API reaches."""
    public = PUBLIC_MODULES[dist]
    needed = _reachable(collection, public)
    roots = sorted({path.split(".")[0] for path in needed})
    dumps = {root: _prune(json.loads(collection.get_member(root).as_json(full=False)), root, needed) for root in roots}
    return {"distribution": dist, "public_modules": list(public), "griffe": version("griffe"), "roots": dumps}


def load_snapshot(path: Path) -> griffe.ModulesCollection:
    document = json.loads(path.read_text())
    collection = griffe.ModulesCollection()
    for name, dump in document["roots"].items():
        module = json.loads(json.dumps(dump), object_hook=griffe.json_decoder)
        collection.set_member(name, module)
    return collection


def _public_names(collection: griffe.ModulesCollection, public: Sequence[str]) -> dict[str, str]:
    """Canonical path of each exported object -> the public path it is exported as (first module wins)."""
    names: dict[str, str] = {}
    for module_path in public:
        try:
            module, exports = _exports(collection, module_path)
        except KeyError:
            continue
        for name in exports:
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
            _reachable(current, [module_path])  # __all__ stated and resolvable
        snapshot = latest_snapshot(project)
        if snapshot is None:
            print(f"{dist}: no API snapshot in {project / 'api'}: nothing released to compare with")
            continue
        version = current_version(project)
        if _version_key(version) < _version_key(snapshot.stem):
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


def write_snapshots(dists: Sequence[str], root: Path = ROOT, *, force: bool = False) -> list[Path]:
    """``<project>/api/<version>.json`` for each of `dists`, from the sources under `root` as they are now."""
    search_paths = default_search_paths(root)
    current = load_sources(search_paths, default_packages(search_paths))
    written = []
    for dist in dists:
        project = project_dir(dist, root)
        out = project / "api" / f"{current_version(project)}.json"
        if out.exists() and not force:
            print(f"{out} exists (a release's snapshot is not rewritten; --force to)")
            continue
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(make_snapshot(dist, current), indent=0, separators=(",", ":"), sort_keys=True) + "\n")
        written.append(out)
    return written


if __name__ == "__main__":
    raise SystemExit(main())
