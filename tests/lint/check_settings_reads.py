"""Fail if any module but `onyxia/core/settings.py` reads an ``ONYXIA_*`` environment variable.

Every switch is a typed field of `onyxia.core.settings` (docs/settings.md), so a new
``os.environ.get("ONYXIA_X")`` elsewhere would be a setting with no type, no default in one place
and no row in the table. This walks every ``.py`` under the given folders (default: packages/*/src)
with `ast` and reports ``file:line`` for

- an ``ONYXIA_*`` string read through ``os.environ`` / ``environ`` (``.get``, ``[...]``, ``.pop``,
  ``.setdefault``, ``in``) or ``os.getenv``, and
- an ``ONYXIA_*`` variable name held in a string constant for a later read (``_ENV = "ONYXIA_X"``);
  names in ``__all__`` are Python names, not variables, and are allowed.

Run: ``python tests/lint/check_settings_reads.py [FOLDER ...]`` (``nox -s lint`` does).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

__all__ = ["ALLOWED", "violations"]

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = ("onyxia/core/settings.py",)  # the one module that reads the environment
_NAME = re.compile(r"ONYXIA_[A-Z0-9_]+")
_READERS = (".get", ".pop", ".setdefault")


def violations(path: Path, source: str | None = None) -> list[str]:
    """``path:line: what`` for each ``ONYXIA_*`` read (or held variable name) in one file, by line."""
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"), str(path))
    allowed = {id(c) for node in ast.walk(tree) if _is_all(node) for c in ast.walk(node)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        arg = _read_arg(node)
        if arg is not None:
            allowed |= {id(c) for c in ast.walk(arg)}
            found.append((arg.lineno, f"reads {_text(arg)} from the environment"))
    held = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME.fullmatch(node.value)
    ]
    found += [(n.lineno, f"holds the variable name {n.value!r} for a later read") for n in held if id(n) not in allowed]
    return [f"{path}:{line}: {what}; use onyxia.core.settings" for line, what in sorted(found)]


def _read_arg(node: ast.AST) -> ast.expr | None:
    """The ``ONYXIA_*`` name (a str or f-string) that `node` reads from the environment, if it is such a read."""
    key: ast.expr | None = None
    if isinstance(node, ast.Call) and node.args:
        func = _dotted(node.func)
        if func.rsplit(".", 1)[-1] == "getenv" or (func.endswith(_READERS) and ".environ." in f".{func}"):
            key = node.args[0]
    elif isinstance(node, ast.Subscript) and _dotted(node.value).endswith("environ"):
        key = node.slice
    elif (
        isinstance(node, ast.Compare)
        and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
        and any(_dotted(c).endswith("environ") for c in node.comparators)
    ):
        key = node.left
    return key if key is not None and _text(key).startswith("ONYXIA_") else None


def _text(node: ast.expr) -> str:
    """A constant string's value, or an f-string's leading text followed by '...'."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return f"{node.values[0].value!s}..."
    return ""


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_all(node: ast.AST) -> bool:
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, ast.AugAssign | ast.AnnAssign)
        else []
    )
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or sorted((ROOT / "packages").glob("*/src"))
    found = [
        line
        for folder in folders
        for path in sorted(folder.rglob("*.py"))
        if not path.as_posix().endswith(ALLOWED)
        for line in violations(path)
    ]
    for line in found:
        print(line)
    print(f"{len(found)} ONYXIA_* environment read(s) outside {ALLOWED[0]} in {len(folders)} folder(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
