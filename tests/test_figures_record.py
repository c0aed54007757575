"""`--record` of the report scripts (tests/figures_record.py): rows of the same id are replaced where they
stand, new ones appended, the rest kept, each stamped with the date and the command that measured it; and
the docs render the written file (the hook's table of packaged models)."""

from __future__ import annotations

import datetime
import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures_record import record

ROOT = Path(__file__).resolve().parent.parent


def test_record_replaces_in_place_and_stamps(tmp_path: Path) -> None:
    path = tmp_path / "real_models.json"
    old = [{"id": "a", "date": "2026-01-01", "command": "python x", "v": 1}, {"id": "b", "date": "2026-01-01", "v": 2}]
    path.write_text(json.dumps({"about": "kept", "runs": old}))
    record(path, [{"id": "b", "v": 20}, {"id": "c", "v": 30}])
    doc = json.loads(path.read_text())
    assert doc["about"] == "kept"
    assert [(r["id"], r["v"]) for r in doc["runs"]] == [("a", 1), ("b", 20), ("c", 30)]
    assert doc["runs"][0]["date"] == "2026-01-01"
    for run in doc["runs"][1:]:
        assert run["date"] == datetime.date.today().isoformat() and run["command"].startswith("python ")


def test_a_recorded_file_renders(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("onyxia_docs_tables", ROOT / "docs" / "hooks" / "figures_tables.py")
    assert spec and spec.loader
    tables = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tables
    spec.loader.exec_module(tables)
    data = tables.load(ROOT / "docs" / "data")
    row = dict(data["packaged_models"]["runs"][0], onyxia_run_ms=123.4, ort_cpu_run_ms=61.7)
    path = tmp_path / "packaged_models.json"
    path.write_text(json.dumps(data["packaged_models"]))
    record(path, [row])
    text = tables.render_table({**data, "packaged_models": json.loads(path.read_text())}, "packaged_models")
    assert f"| {row['id']} |" in text and "| 123.4 | 61.70 | 2x |" in text
