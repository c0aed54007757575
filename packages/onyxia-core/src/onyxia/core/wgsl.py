"""The WGSL preprocessor (naga_oil's role): shader defs, value substitution and imports.

Operators specialise one shader per family by defs instead of keeping a file per variant:

- ``#ifdef NAME`` / ``#ifndef NAME`` / ``#if NAME == value`` / ``#if NAME != value`` /
  ``#else`` / ``#endif`` (nestable) keep or drop lines;
- ``#{NAME}`` is replaced by the def's value (an undefined name is an error, never blank);
- ``#import onyxia::indexing`` pulls in a module that opens with
  ``#define_import_path onyxia::indexing``; each module is included once, cycles are errors.

Modules are found by scanning the ``wgsl/`` folders of the packages in `ShaderLibrary`, through
`importlib.resources`, so a downstream operator package adds its own folder and no list is kept
by hand. Every error names the shader (label or module) and line.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Mapping

from onyxia.core.errors import ShaderError

__all__ = ["ShaderLibrary", "load_wgsl", "preprocess"]

_SUBST = re.compile(r"#\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DIRECTIVE = re.compile(r"^\s*#(ifdef|ifndef|if|else|endif|import|define_import_path)\b\s*(.*?)\s*$")
_IMPORT = re.compile(r"^([A-Za-z_][\w]*(?:::[A-Za-z_]\w*)*)(?:::\{[^}]*\})?$")


def load_wgsl(package: str, filename: str) -> str:
    """Read a `.wgsl` file shipped beside an operator module (``load_wgsl(__package__, "x.wgsl")``)."""
    try:
        return importlib.resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as e:
        raise ShaderError(f"shader file '{filename}' not found in package '{package}'") from e


class ShaderLibrary:
    """Importable WGSL modules, keyed by their ``#define_import_path``."""

    def __init__(self) -> None:
        self._modules: dict[str, tuple[str, str]] = {}  # path -> (origin, source)
        self._packages: list[tuple[str, str]] = []  # (package, folder) already scanned

    def add_package(self, package: str, folder: str = "wgsl") -> None:
        """Register every ``.wgsl`` file under ``<package>/<folder>/`` that declares an import path."""
        if (package, folder) in self._packages:
            return
        self._packages.append((package, folder))
        root = importlib.resources.files(package).joinpath(folder)
        for entry in sorted(root.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".wgsl"):
                self.add_module(entry.read_text(encoding="utf-8"), origin=f"{package}/{folder}/{entry.name}")

    def add_module(self, source: str, origin: str) -> None:
        for line in source.splitlines():
            match = _DIRECTIVE.match(line)
            if match and match.group(1) == "define_import_path":
                self._modules[match.group(2)] = (origin, source)
                return
        raise ShaderError(f"{origin}: WGSL module has no '#define_import_path' line")

    def module(self, path: str, where: str) -> tuple[str, str]:
        if path not in self._modules:
            known = ", ".join(sorted(self._modules)) or "none"
            raise ShaderError(f"{where}: unknown import '{path}' (known modules: {known})")
        return self._modules[path]


def preprocess(source: str, defs: Mapping[str, object], label: str, library: ShaderLibrary | None = None) -> str:
    """Expand directives, imports and ``#{NAME}``; returns plain WGSL."""
    included: list[str] = []
    body = _expand(source, defs, label, library or ShaderLibrary(), included, stack=())
    # `enable` directives must precede every declaration, imported modules' included
    lines = body.split("\n")
    enables = [line for line in lines if line.strip().startswith("enable ")]
    if not enables:
        return body
    rest = [line for line in lines if not line.strip().startswith("enable ")]
    return "\n".join(dict.fromkeys(line.strip() for line in enables)) + "\n" + "\n".join(rest)


def _expand(
    source: str,
    defs: Mapping[str, object],
    label: str,
    library: ShaderLibrary,
    included: list[str],
    stack: tuple[str, ...],
) -> str:
    out: list[str] = []
    imports: list[str] = []
    active: list[bool] = []  # one entry per open #if: is this branch taken
    seen_else: list[bool] = []
    lines = source.splitlines()
    for number, line in enumerate(lines, start=1):
        where = f"shader '{label}' line {number}"
        match = _DIRECTIVE.match(line)
        if match:
            kind, arg = match.groups()
            if kind in ("ifdef", "ifndef", "if"):
                parent = all(active)
                active.append(parent and _condition(kind, arg, defs, where))
                seen_else.append(False)
            elif kind == "else":
                if not active or seen_else[-1]:
                    raise ShaderError(f"{where}: '#else' without a matching '#if'")
                seen_else[-1] = True
                parent = all(active[:-1])
                active[-1] = parent and not active[-1]
            elif kind == "endif":
                if not active:
                    raise ShaderError(f"{where}: '#endif' without a matching '#if'")
                active.pop()
                seen_else.pop()
            elif kind == "import" and all(active):
                imports.append(_import_path(arg, where))
            out.append("")  # keep line numbers aligned with the source for naga's errors
            continue
        if not all(active):
            out.append("")
            continue
        out.append(_SUBST.sub(lambda m, where=where: _lookup(m.group(1), defs, where), line))  # type: ignore[misc]
    if active:
        raise ShaderError(f"shader '{label}': {len(active)} '#if' block(s) not closed by '#endif'")
    prefix: list[str] = []
    for path in imports:
        if path in stack:
            raise ShaderError(f"shader '{label}': cyclic import {' -> '.join((*stack, path))}")
        if path in included:
            continue
        origin, module_source = library.module(path, f"shader '{label}'")
        prefix.append(_expand(module_source, defs, origin, library, included, (*stack, path)))
        included.append(path)
    return "\n".join([*prefix, *out]) if prefix else "\n".join(out)


def _condition(kind: str, arg: str, defs: Mapping[str, object], where: str) -> bool:
    if kind == "ifdef":
        return arg in defs
    if kind == "ifndef":
        return arg not in defs
    match = re.fullmatch(r"([A-Za-z_]\w*)\s*(==|!=)\s*(\S+)", arg)
    if not match:
        raise ShaderError(f"{where}: '#if {arg}' must read '#if NAME == value' or '#if NAME != value'")
    name, op, value = match.groups()
    if name not in defs:
        raise ShaderError(f"{where}: '#if' on undefined shader def '{name}'")
    equal = _render(defs[name]) == value
    return equal if op == "==" else not equal


def _lookup(name: str, defs: Mapping[str, object], where: str) -> str:
    if name not in defs:
        raise ShaderError(f"{where}: shader def '{name}' is not defined (used as #{{{name}}})")
    return _render(defs[name])


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _import_path(arg: str, where: str) -> str:
    match = _IMPORT.match(arg)
    if not match:
        raise ShaderError(f"{where}: malformed '#import {arg}'")
    return match.group(1)
