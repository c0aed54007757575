"""Fill the generated blocks of the docs from the code: the operator tables, the pass table, the counts.

Each page below holds blocks between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``
(`onyxia.cli.catalog.markdown.replace_block`); this script renders every block a page holds and writes
the page when it changed. ``--check`` writes nothing and exits 1 naming the stale pages, which is what
`tests/test_docs_tables.py` asserts. Run it after adding an operator or a pass:

    .venv/bin/python tools/docs_tables.py            # or --check

The missing-operator table depends on the installed onnx and onnxruntime (its header names them);
regenerate it with the versions the project pins.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from onyxia.cli.catalog import operator_catalog, pass_rows
from onyxia.cli.catalog.markdown import counts, missing_table, pass_table, replace_block, supported_table
from onyxia.operators import core_operator_registry

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("ARCHITECTURE.md", "README.md", "docs")  # files, or folders whose *.md are read
EXPECTED = ROOT / "packages/onyxia-operators/tests/conformance/expected.py"  # test data: read, not imported
_BLOCK = re.compile(r"<!-- generated:([\w-]+) -->")


def blocks() -> dict[str, str]:
    """Every block name this script knows, with its text (built-in operators only: no plugins)."""
    registry = core_operator_registry(plugins=False)
    catalog, rows = operator_catalog(registry), pass_rows(registry)
    return {
        "operators": supported_table(catalog),
        "operators-missing": missing_table(catalog),
        "passes": pass_table(rows),
        **counts(catalog, rows),
        **conformance_figures(),
    }


def conformance_figures() -> dict[str, str]:
    """The conformance suite's gates, as `conformance/expected.py` sets them: the unbaked pass floor and
    how many selected cases are listed as known failures (measured figures come from its report)."""
    values = {}
    for node in ast.parse(EXPECTED.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Constant, ast.Dict)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name):
                values[target.id] = node.value
    floor, expected = values["UNBAKED_PASS_FLOOR"], values["EXPECTED"]
    assert isinstance(floor, ast.Constant) and isinstance(expected, ast.Dict), EXPECTED
    return {"conformance-pass-floor": str(floor.value), "conformance-expected-failures": str(len(expected.keys))}


def pages() -> list[Path]:
    found: list[Path] = []
    for entry in (ROOT / p for p in PAGES):
        found += sorted(entry.rglob("*.md")) if entry.is_dir() else [entry] if entry.is_file() else []
    return found


def render(texts: dict[str, str] | None = None) -> dict[Path, tuple[str, str]]:
    """page -> (committed text, generated text), for every page holding a generated block."""
    texts = texts if texts is not None else blocks()
    out = {}
    for page in pages():
        old = page.read_text(encoding="utf-8")
        names = sorted(set(_BLOCK.findall(old)))
        new = old
        for name in names:
            if name not in texts:
                raise SystemExit(f"{page}: unknown generated block {name!r}; known: {', '.join(sorted(texts))}")
            new = replace_block(new, name, texts[name], str(page.relative_to(ROOT)))
        if names:
            out[page] = (old, new)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    stale = {page: new for page, (old, new) in render().items() if old != new}
    for page, new in stale.items():
        print(f"{'stale' if args.check else 'wrote'}: {page.relative_to(ROOT)}")
        if not args.check:
            page.write_text(new, encoding="utf-8")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
