"""`onyxia bench --record PATH`: the run lands in the docs' figures file as one dated entry with its command,
holding the same figures as `--json`; a second run of the same settings replaces it, other runs stay."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from onyxia.core.settings import override

ARGV = ["bench", "--size", "tiny", "--precision", "q4", "--engines", "onyxia", "--prompt-tokens", "8"]
ARGV += ["--decode-tokens", "4", "--prefill-tokens", "8", "--batch", "1,2"]
OTHER = {"id": "someone-else", "date": "2026-01-01", "command": "onyxia bench", "precisions": {}}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """Two runs with the same settings into one figures file that already holds another run."""
    from onyxia.cli import main

    root = tmp_path_factory.mktemp("record")
    figures, report = root / "bench.json", root / "report.json"
    figures.write_text(json.dumps({"about": "kept", "runs": [OTHER]}))
    with override(cache_dir=root / "cache"):
        assert main([*ARGV, "--record", str(figures)]) == 0
        first = json.loads(figures.read_text())
        assert main([*ARGV, "--record", str(figures), "--json", str(report)]) == 0
    return first, json.loads(report.read_text()), figures


def test_the_run_is_one_dated_entry_with_its_command(recorded: tuple[dict[str, Any], dict[str, Any], Path]) -> None:
    first, _, figures = recorded
    assert first["about"] == "kept" and first["runs"][0] == OTHER
    (entry,) = first["runs"][1:]
    assert entry["id"] == "gemma3-tiny-onnx-community-q4-p8"
    # the command main() was given, whatever the process's own argv (pytest's, a worker's)
    assert entry["command"] == shlex.join(["onyxia", *ARGV, "--record", str(figures)]) and len(entry["date"]) == 10
    assert entry["arch"] == "gemma3" and entry["layout"] == "onnx-community" and entry["prompt_tokens"] == 8


def test_a_rerun_replaces_it_with_the_json_reports_figures(
    recorded: tuple[dict[str, Any], dict[str, Any], Path],
) -> None:
    _, report, figures = recorded
    runs = json.loads(figures.read_text())["runs"]
    assert [r["id"] for r in runs] == ["someone-else", "gemma3-tiny-onnx-community-q4-p8"]  # replaced in place
    engine, measured = runs[1]["precisions"]["q4"]["engines"]["onyxia"], report["precisions"]["q4"]["engines"]["onyxia"]
    assert engine["status"] == "ok"
    for key in ("decode_tok_s", "prefill_s", "ttft_s", "load_compile_s"):
        assert engine[key] == measured[key], key
    bound = report["precisions"]["q4"]["bound"]["onyxia_percent_of_bound"]
    assert runs[1]["precisions"]["q4"]["percent_of_bound"] == round(bound)
    batched = {str(b["streams"]): b["aggregate_decode_tok_s"] for b in report["precisions"]["q4"]["batched"]}
    assert runs[1]["precisions"]["q4"]["batched_decode_tok_s"] == batched and set(batched) == {"1", "2"}
    assert not figures.with_name("bench.json.tmp").exists()
