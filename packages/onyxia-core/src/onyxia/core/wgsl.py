"""The WGSL preprocessor (naga_oil's role): shader defs, value substitution and imports.

Operators specialise one shader per family by defs instead of keeping a file per variant:

- ``#ifdef NAME`` / ``#ifndef NAME`` / ``#if NAME == value`` / ``#if NAME != value`` /
  ``#else`` / ``#endif`` (nestable) keep or drop lines;
- ``#{NAME}`` is replaced by the def's value (an undefined name is an error, never blank);
- ``#for VAR in ITEMS`` / ``#endfor`` (nestable, with each other and with ``#if`` blocks) repeat their
  body once per whitespace-separated item, so a shader with up to N numbered bindings (``w0 .. w3``)
  writes each declaration and ``switch`` case once. ITEMS may hold ``#{NAME}`` (``#for s in #{SLOTS}``;
  an empty list gives no copies). In each copy ``#{VAR}`` becomes the item before anything else, so
  ``#{BIND_W#{s}}`` reads def ``BIND_W1``, and the copy's directives then apply as written there. A
  loop's ``#if`` blocks close inside it, and VAR may not shadow a def or an enclosing loop's VAR;
- ``#import onyxia::indexing`` pulls in a module that opens with
  ``#define_import_path onyxia::indexing``; each module is included once, cycles are errors.
  ``#import onyxia::indexing::{flat_invocation, unravel}`` still includes the whole module (WGSL text
  cannot be cut apart safely), but checks that the module declares each listed item at module scope
  (``fn``, ``struct``, ``const``, ``override``, ``alias`` or ``var``, after its own directives), so the
  list is a checked statement of what the shader uses rather than a comment that can go stale.

Modules are found by scanning the ``wgsl/`` folders of the packages in `ShaderLibrary`, through
`importlib.resources`, so a downstream operator package adds its own folder and no list is kept
by hand. Every error names the shader (label or module) and line.
"""

from __future__ import annotations

import functools
import importlib.resources
import math
import numbers
import re
from collections.abc import Mapping

from onyxia.core.errors import ShaderError
from onyxia.core.wgsl_imports import check_items, declared_names, import_path

__all__ = ["ShaderLibrary", "load_wgsl", "preprocess"]

_SUBST = re.compile(r"#\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DIRECTIVE = re.compile(r"^\s*#(ifdef|ifndef|if|else|endif|for|endfor|import|define_import_path)\b\s*(.*?)\s*$")
_FOR = re.compile(r"([A-Za-z_]\w*)\s+in\b\s*(.*)")
_NAME = re.compile(r"[A-Za-z_]\w*")
_OPENS = ("ifdef", "ifndef", "if")

# A source line as the expansion sees it: (line number in its shader, text, the enclosing loops' VARs).
_Line = tuple[int, str, tuple[str, ...]]


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
    included: dict[str, frozenset[str]] = {}  # module path -> the names it declares
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
    included: dict[str, frozenset[str]],
    stack: tuple[str, ...],
) -> str:
    out, imports = _body(source, defs, label)
    prefix: list[str] = []
    for path, listed, at in imports:
        if path in stack:
            raise ShaderError(f"shader '{label}': cyclic import {' -> '.join((*stack, path))}")
        if path not in included:
            origin, module_source = library.module(path, f"shader '{label}'")
            text = _expand(module_source, defs, origin, library, included, (*stack, path))
            prefix.append(text)
            included[path] = declared_names(text)
        check_items(path, listed, included[path], library.module(path, at)[0], at)
    return "\n".join([*prefix, *out]) if prefix else "\n".join(out)


_BODIES: dict[tuple[object, ...], tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...], str], ...]]] = {}
_BODY_CACHE_LIMIT = 4096


def _body(
    source: str, defs: Mapping[str, object], label: str
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...], str], ...]]:
    """`source`'s own lines expanded, and its imports; memoized on the defs it reads, so a module
    (`onyxia::entry`, `onyxia::indexing`) imported by every shader of a plan is expanded once, not
    once per shader. A source with `#for` loops builds def names (``#{BIND_W#{s}}``): keyed on all defs."""
    names = _referenced(source)
    used = defs.items() if names is None else ((n, defs[n]) for n in names if n in defs)
    key = (source, label, tuple(sorted((n, type(v).__name__, repr(v)) for n, v in used)))
    found = _BODIES.get(key)
    if found is None:
        if len(_BODIES) >= _BODY_CACHE_LIMIT:
            _BODIES.clear()
        found = _BODIES[key] = _expand_body(source, defs, label)
    return found


@functools.lru_cache(maxsize=512)
def _referenced(source: str) -> frozenset[str] | None:
    """The def names `source` reads (directive arguments, ``#{NAME}``); None when it has `#for` loops."""
    names: set[str] = set()
    for line in source.splitlines():
        match = _DIRECTIVE.match(line)
        if match and match.group(1) in ("for", "endfor"):
            return None
        if match and match.group(1) in _OPENS:
            names.update(_NAME.findall(match.group(2)))
        names.update(_SUBST.findall(line))
    return frozenset(names)


def _expand_body(
    source: str, defs: Mapping[str, object], label: str
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...], str], ...]]:
    out: list[str] = []
    imports: list[tuple[str, tuple[str, ...], str]] = []  # (path, listed items, where)
    active: list[bool] = []  # one entry per open #if: is this branch taken
    seen_else: list[bool] = []
    pending: list[_Line] = [(number, line, ()) for number, line in enumerate(source.splitlines(), start=1)]
    pending.reverse()  # last line first, so a `#for` puts its copies back on top and they expand like the source
    while pending:
        number, line, loops = pending.pop()
        where = f"shader '{label}' line {number}"
        match = _DIRECTIVE.match(line)
        if match:
            kind, arg = match.groups()
            if kind in _OPENS:
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
            elif kind == "for":
                var, items = _for_header(arg, where)
                body = _loop_body(pending, label, where)
                if all(active):
                    pending.extend(reversed(_unroll(var, items, body, loops, defs, where)))
                else:
                    out.extend([""] * (len(body) + 1))  # the skipped body and its '#endfor'
            elif kind == "endfor":
                raise ShaderError(f"{where}: '#endfor' without a matching '#for'")
            elif kind == "import" and all(active):
                imports.append((*import_path(arg, where), where))
            out.append("")  # keep line numbers aligned with the source (up to a loop's copies) for naga's errors
            continue
        if not all(active):
            out.append("")
            continue
        out.append(_substitute(line, defs, where))
    if active:
        raise ShaderError(f"shader '{label}': {len(active)} '#if' block(s) not closed by '#endif'")
    return tuple(out), tuple(imports)


def _for_header(arg: str, where: str) -> tuple[str, str]:
    """(VAR, ITEMS) of ``#for VAR in ITEMS``."""
    match = _FOR.fullmatch(arg)
    if not match:
        raise ShaderError(f"{where}: '#for {arg}' must read '#for NAME in ITEMS'")
    return match.group(1), match.group(2)


def _loop_body(pending: list[_Line], label: str, where: str) -> list[_Line]:
    """Take the lines up to the `#for`'s own `#endfor` off `pending`; nested loops stay in the body whole.
    An `#if` may not straddle the loop's edge: each copy would open or close it once more."""
    body: list[_Line] = []
    loops = ifs = 0
    while pending:
        line = pending.pop()
        match = _DIRECTIVE.match(line[1])
        kind = match.group(1) if match else None
        if kind == "endfor" and loops == 0:
            if ifs:
                raise ShaderError(f"shader '{label}' line {line[0]}: '#endfor' inside an '#if' opened in its loop")
            return body
        loops += 1 if kind == "for" else -1 if kind == "endfor" else 0
        ifs += 1 if kind in _OPENS else -1 if kind == "endif" else 0
        if ifs < 0 or (kind == "else" and ifs == 0):
            raise ShaderError(f"shader '{label}' line {line[0]}: '#{kind}' of an '#if' opened outside its loop")
        body.append(line)
    raise ShaderError(f"{where}: '#for' not closed by '#endfor'")


def _unroll(
    var: str, items: str, body: list[_Line], loops: tuple[str, ...], defs: Mapping[str, object], where: str
) -> list[_Line]:
    """One copy of `body` per item, ``#{var}`` replaced in every line (nested loops' headers included)."""
    if var in defs or var in loops:
        shadowed = "shader def" if var in defs else "loop variable"
        raise ShaderError(f"{where}: '#for {var}' shadows the {shadowed} '{var}'")
    values = _substitute(items, defs, where).split()
    token = f"#{{{var}}}"
    return [(number, text.replace(token, value), (*loops, var)) for value in values for number, text, _ in body]


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
    equal = _render(defs[name], name, where) == value
    return equal if op == "==" else not equal


def _substitute(text: str, defs: Mapping[str, object], where: str) -> str:
    return _SUBST.sub(lambda m: _lookup(m.group(1), defs, where), text)


def _lookup(name: str, defs: Mapping[str, object], where: str) -> str:
    if name not in defs:
        raise ShaderError(f"{where}: shader def '{name}' is not defined (used as #{{{name}}})")
    return _render(defs[name], name, where)


def _render(value: object, name: str, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    # str() would paste `inf`, `nan` or an int no 32-bit type holds, which naga rejects only at load
    if isinstance(value, numbers.Integral) and not -(2**31) <= int(value) < 2**32:
        raise ShaderError(f"{where}: shader def '{name}' = {value} fits neither i32 nor u32")
    if isinstance(value, numbers.Real) and not math.isfinite(value):
        raise ShaderError(f"{where}: shader def '{name}' is {value}, which WGSL cannot spell (use wgsl_literal)")
    return str(value)
