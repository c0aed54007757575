"""The README's results table is exactly what tools/readme_figures.py renders from docs/data/*.json (the
docs' figures), so the front page cannot drift from the measured runs; and every JSON run names its date
and the command that measured it."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> object:
    spec = importlib.util.spec_from_file_location("onyxia_readme_figures", ROOT / "tools" / "readme_figures.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_readme_table_is_rendered_from_the_json() -> None:
    tool = _tool()
    text = tool.README.read_text(encoding="utf-8")  # type: ignore[attr-defined]
    assert text == tool.expected_readme(text), "run: python tools/readme_figures.py"  # type: ignore[attr-defined]


def test_every_run_says_when_and_how_it_was_measured() -> None:
    files = sorted((ROOT / "docs" / "data").glob("*.json"))
    assert {f.stem for f in files} >= {"bench", "conformance", "packaged_models", "pipelines", "real_models", "serving"}
    for path in files:
        doc = json.loads(path.read_text(encoding="utf-8"))
        ids = [run["id"] for run in doc["runs"]]
        assert len(ids) == len(set(ids)), f"{path.name}: a run id twice"
        for run in doc["runs"]:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", run["date"]), f"{path.name}: {run['id']}: date {run['date']!r}"
            assert run["command"].split()[0] in ("onyxia", "python", "MESA_SHADER_CACHE_DISABLE=true"), run["command"]
