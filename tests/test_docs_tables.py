"""The generated blocks of the docs (the operator tables of docs/operators/supported.md, ARCHITECTURE.md's
pass table, the counts quoted in prose) equal what `onyxia.cli.catalog` renders from the code, as
`tools/docs_tables.py` writes them. This runs from the checkout, where the pages are.

The missing-operator table also depends on the installed onnx and onnxruntime, whose versions its first
line names. Under other versions that block cannot be compared; the test then checks what the code
decides: no operator the page lists as missing has been registered since."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from onyxia.cli.catalog import operator_catalog
from onyxia.operators import core_operator_registry

ROOT = Path(__file__).resolve().parent.parent
_VERSIONS = re.compile(r"Compared with the schemas of (.*?)\.")
_MISSING = re.compile(r"<!-- generated:operators-missing -->(.*?)<!-- /generated:operators-missing -->", re.S)


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "tools" / "docs_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_tables"] = module
    spec.loader.exec_module(module)
    return module


TOOL = _tool()
BLOCKS = TOOL.blocks()


def test_pages_hold_the_operator_and_pass_tables() -> None:
    pages = {p.relative_to(ROOT).as_posix(): old for p, (old, _) in TOOL.render(BLOCKS).items()}
    assert "<!-- generated:passes -->" in pages["ARCHITECTURE.md"]
    assert "<!-- generated:operators -->" in pages["docs/operators/supported.md"]


def test_generated_blocks_are_current() -> None:
    stale = []
    same_schemas = _recorded_versions() == _found(_VERSIONS, BLOCKS["operators-missing"]).group(1)
    for page, (old, new) in TOOL.render(BLOCKS).items():
        if not same_schemas and _MISSING.search(old):  # keep the committed missing block; the rest must match
            committed = _found(_MISSING, old).group(0)
            new = _MISSING.sub(committed.replace("\\", "\\\\"), new)
        if old != new:
            stale.append(page.relative_to(ROOT).as_posix())
    assert not stale, f"run `python tools/docs_tables.py`: stale generated blocks in {stale}"


def test_no_operator_listed_as_missing_is_registered() -> None:
    text = (ROOT / "docs" / "operators" / "supported.md").read_text(encoding="utf-8")
    block = _MISSING.search(text)
    assert block is not None
    rows = re.findall(r"^\| ([\w.]+) \| (\w+) \| ([\d, ]+) \| ([^|]*)\|$", block.group(1), re.M)
    assert rows, "the missing table has rows"
    registry = core_operator_registry(plugins=False)
    domain = {"ai.onnx": ""}
    served = [
        (d, op, v)
        for d, op, versions, _ in rows
        for v in map(int, versions.split(", "))
        if registry.get(domain.get(d, d), op, v) is not None
    ]
    assert not served, f"listed as missing but registered: {served}; run `python tools/docs_tables.py`"


def test_a_changed_figure_makes_its_page_stale() -> None:
    changed = TOOL.render({**BLOCKS, "ops-total": "0", "passes": "| changed |"})
    stale = {p.relative_to(ROOT).as_posix() for p, (old, new) in changed.items() if old != new}
    assert {"ARCHITECTURE.md", "docs/operators/supported.md"} <= stale


def _recorded_versions() -> str:
    text = (ROOT / "docs" / "operators" / "supported.md").read_text(encoding="utf-8")
    return _found(_VERSIONS, text).group(1)


def _found(pattern: re.Pattern[str], text: str) -> re.Match[str]:
    match = pattern.search(text)
    assert match is not None, f"no {pattern.pattern!r} in the page"
    return match


def test_the_catalog_counts_every_registration() -> None:
    registry = core_operator_registry(plugins=False)
    catalog = operator_catalog(registry)
    assert {(r.domain, r.op_type) for r in catalog.supported} == set(registry.op_types())
    assert BLOCKS["ops-total"] == str(len(registry.op_types()))


def test_conformance_figures_are_the_suites_own() -> None:
    path = ROOT / "packages" / "onyxia-operators" / "tests" / "conformance" / "expected.py"
    spec = importlib.util.spec_from_file_location("conformance_expected", path)
    assert spec is not None and spec.loader is not None
    expected = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(expected)
    assert BLOCKS["conformance-pass-floor"] == str(expected.UNBAKED_PASS_FLOOR)
    assert BLOCKS["conformance-expected-failures"] == str(len(expected.EXPECTED))
