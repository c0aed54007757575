"""Public API snapshots: what a release records of each distribution's public API, and reading it back.

The public API of a distribution is the ``__all__`` of each module in `PUBLIC_MODULES` (its top
package and the subpackages users import from); everything else is internal, however it is named.
A snapshot, ``<project>/api/<version>.json``, is griffe's JSON dump of those modules pruned to what
their exports reach (the exported objects whole, their base classes, and the modules on the way),
without docstrings or file paths, so it is small, machine-independent and self-contained: loaded
into a `griffe.ModulesCollection`, its aliases resolve without the sources of that release.
"""

from __future__ import annotations

import contextlib
import json
import re
import tomllib
from collections.abc import Iterable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import griffe

__all__ = [
    "PUBLIC_MODULES",
    "ROOT",
    "current_version",
    "default_packages",
    "default_search_paths",
    "exports",
    "latest_snapshot",
    "load_snapshot",
    "load_sources",
    "make_snapshot",
    "project_dir",
    "reachable",
    "version_key",
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
_VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.M)


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


def version_key(text: str) -> tuple[int, ...]:
    """Releases order by their numbers, not as strings: "0.10.1" -> (0, 10, 1)."""
    return tuple(int(part) for part in re.findall(r"\d+", text))


def latest_snapshot(project: Path) -> Path | None:
    snapshots = sorted((project / "api").glob("*.json"), key=lambda p: version_key(p.stem))
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


def exports(collection: griffe.ModulesCollection, module_path: str) -> tuple[griffe.Module, list[str]]:
    module = collection.get_member(module_path)
    if module.exports is None:
        raise SystemExit(f"{module_path}: a public module must state __all__")
    return module, [str(name) for name in module.exports]


def reachable(collection: griffe.ModulesCollection, public: Sequence[str]) -> set[str]:
    """Paths the public modules' exports reach: aliases, their targets, and base classes."""
    needed: set[str] = set(public)
    stack: list[Any] = []
    for module_path in public:
        module, names = exports(collection, module_path)
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
    needed = reachable(collection, public)
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
