"""`#import` lines of the WGSL preprocessor: parsing ``#import a::b::{x, y}`` and checking that the module
declares each listed item at module scope, so an item list is a checked statement of what a shader
uses rather than a comment that can go stale."""

from __future__ import annotations

import functools
import re

from onyxia.core.errors import ShaderError

__all__ = ["check_items", "declared_names", "import_path"]

_IMPORT = re.compile(r"^([A-Za-z_][\w]*(?:::[A-Za-z_]\w*)*)(?:::\{([^}]*)\})?$")
_NAME = re.compile(r"[A-Za-z_]\w*")
# Braces (for the nesting depth) and declarations; comments are stripped first.
_DECLARATION = re.compile(r"[{}]|\b(?:fn|struct|const|override|alias|var)\b\s*(?:<[^>]*>)?\s*([A-Za-z_]\w*)")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def import_path(arg: str, where: str) -> tuple[str, tuple[str, ...]]:
    """(module path, listed items) of ``#import a::b`` or ``#import a::b::{x, y}``."""
    match = _IMPORT.match(arg)
    if not match:
        raise ShaderError(f"{where}: malformed '#import {arg}'")
    if match.group(2) is None:
        return match.group(1), ()
    items = tuple(item.strip() for item in match.group(2).split(","))
    if not all(_NAME.fullmatch(item) for item in items):
        raise ShaderError(f"{where}: malformed item list in '#import {arg}' (expected '{{name, name, ...}}')")
    return match.group(1), items


@functools.lru_cache(maxsize=512)
def declared_names(text: str) -> frozenset[str]:
    """The names a preprocessed module declares at module scope (brace depth 0)."""
    names: set[str] = set()
    depth = 0
    for match in _DECLARATION.finditer(_COMMENT.sub("", text)):
        token = match.group(0)
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
        elif depth == 0:
            names.add(match.group(1))
    return frozenset(names)


def check_items(path: str, items: tuple[str, ...], declared: frozenset[str], origin: str, where: str) -> None:
    """Raise naming the shader line, the missing items and what module `path` (from `origin`) declares."""
    missing = [item for item in items if item not in declared]
    if missing:
        listed = ", ".join(sorted(declared)) or "nothing"
        raise ShaderError(
            f"{where}: '#import {path}::{{{', '.join(items)}}}' lists {', '.join(repr(m) for m in missing)}, "
            f"which module '{path}' ({origin}) does not declare (it declares: {listed})"
        )
