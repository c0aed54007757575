"""`onyxia bench --size tiny`: every engine in its own process, every figure in the JSON, engines that
cannot run reported with a reason instead of failing the run."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from onyxia.cli.bench import runners, worker
from onyxia.cli.bench.report import FIGURES
from onyxia.cli.bench.suite import prompt_ids
from onyxia.cli.commands import bench as bench_command
from onyxia.core.settings import override

ENGINE_FIGURES = ("decode_tok_s", "prefill_s", "prefill_tok_s", "ttft_s", "load_compile_s", "peak_rss_bytes")
BOUND_FIGURES = ("weight_bytes", "kv_bytes", "bytes_per_step", "bound_ms_per_token", "onyxia_percent_of_bound")


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One tiny run of onyxia and ort-cpu (short prompt and decode keep it to seconds)."""
    from onyxia.cli import main

    root = tmp_path_factory.mktemp("bench")
    out = root / "bench.json"
    with override(cache_dir=root / "cache"):  # what ONYXIA_CACHE_DIR sets
        argv = ["bench", "--size", "tiny", "--precision", "both", "--engines", "onyxia,ort-cpu", "--json", str(out)]
        code = main([*argv, "--prompt-tokens", "8", "--decode-tokens", "8", "--prefill-tokens", "16"])
    assert code == 0
    return json.loads(out.read_text())


def test_bench_json_has_every_figure_per_engine_and_precision(tiny_report: dict[str, Any]) -> None:
    assert tiny_report["settings"]["engines"] == ["onyxia", "ort-cpu"]
    assert set(tiny_report["precisions"]) == {"fp32", "q4"}
    for part in tiny_report["precisions"].values():
        onyxia, ort = part["engines"]["onyxia"], part["engines"]["ort-cpu"]
        assert onyxia["status"] == ort["status"] == "ok", (onyxia.get("reason"), ort.get("reason"))
        for result in (onyxia, ort):
            assert all(result[key] > 0 for key in ENGINE_FIGURES), result
            assert len(result["tokens"]) == 9  # the first token, then 8 decode steps
        assert onyxia["gpu_bytes"] > 0 and onyxia["upload_s"] >= 0 and onyxia["warmup_s"] >= 0
        assert set(part["ratios"]) == {"ort-cpu"}
        assert part["ratios"]["ort-cpu"]["decode_tok_s"] == pytest.approx(onyxia["decode_tok_s"] / ort["decode_tok_s"])
        assert all(part["bound"][key] > 0 for key in BOUND_FIGURES)
        assert part["bound"]["position"] == 8 + 8 // 2
        memory = part["memory"]
        assert memory["weight_bytes"] == onyxia["weight_bytes"] > 0 and memory["kv_capacity_bytes"] > 0
        assert memory["rss_over_weights"] == pytest.approx(onyxia["peak_rss_bytes"] / onyxia["weight_bytes"])
        beyond = (onyxia["peak_rss_bytes"] - onyxia["gpu_bytes"]) / onyxia["weight_bytes"]
        assert memory["rss_beyond_gpu_over_weights"] == pytest.approx(beyond)
        assert onyxia["gpu_bytes"] >= memory["weight_bytes"] + memory["kv_capacity_bytes"]


def test_bench_engines_agree_on_greedy_ids_in_fp32(tiny_report: dict[str, Any]) -> None:
    engines = tiny_report["precisions"]["fp32"]["engines"]
    assert engines["onyxia"]["tokens"] == engines["ort-cpu"]["tokens"]


def test_bench_bandwidth_is_measured_in_the_same_run(tiny_report: dict[str, Any]) -> None:
    bandwidth = tiny_report["bandwidth"]
    assert bandwidth["bytes_per_second"] > 1e8 and bandwidth["copies"] >= 1
    assert bandwidth["adapter"] == tiny_report["system"]["adapter"]


def test_bench_prints_the_table_and_ratios(
    cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runners, "webgpu_python", _unavailable)
    with override(cache_dir=tmp_path):
        result = cli(
            "bench", "--size", "tiny", "--precision", "fp32", "--engines", "ort-cpu,ort-webgpu",
            "--prompt-tokens", "4", "--decode-tokens", "2", "--prefill-tokens", "4",
        )  # fmt: skip
    assert result.code == 0, result.err
    assert "decode tok/s" in result.out and "host peak RSS" in result.out
    assert "ort-webgpu: unavailable" in result.out and "no venv in this test" in result.out
    assert "decode bound:" in result.out and "Onyxia decode" not in result.out  # no onyxia engine, no percentage


def test_unknown_engine_is_an_input_error(cli: Callable[..., Any]) -> None:
    result = cli("bench", "--size", "tiny", "--engines", "onyxia,tensorflow")
    assert result.code == 2 and "tensorflow" in result.err


def test_command_engine_list_is_the_runners(tmp_path: Path) -> None:
    assert bench_command.ENGINES == runners.ENGINES


def test_unavailable_webgpu_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runners, "webgpu_python", _unavailable)
    result = runners.run_engine("ort-webgpu", {"precision": "fp32"}, tmp_path, 60)
    assert result == {
        "engine": "ort-webgpu",
        "precision": "fp32",
        "status": "unavailable",
        "reason": "no venv in this test",
    }


def test_worker_reports_a_missing_provider_as_unavailable(capsys: pytest.CaptureFixture[str]) -> None:
    worker.ORT_PROVIDERS["ort-missing"] = "NoSuchExecutionProvider"
    try:
        spec = {"engine": "ort-missing", "precision": "fp32", "model_path": "unused.onnx"}
        assert worker.main([json.dumps(spec)]) == 0
    finally:
        del worker.ORT_PROVIDERS["ort-missing"]
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["status"] == "unavailable" and "NoSuchExecutionProvider" in result["reason"]


def test_peak_rss_is_this_process_size() -> None:
    assert 10 << 20 < worker.peak_rss_bytes() < 64 << 30


def test_prompt_ids_are_fixed_and_avoid_special_tokens() -> None:
    ids = prompt_ids(32, 1024)
    assert ids == prompt_ids(32, 1024) and len(ids) == 32 and ids[0] == 2
    assert all(7 <= i < 1024 for i in ids[1:]) and len(set(ids[1:])) == 31


def test_every_figure_has_a_label() -> None:
    assert {f.key for f in FIGURES} >= set(ENGINE_FIGURES) | {"gpu_bytes"}


def _unavailable(cache: Path) -> Path:
    raise worker.EngineUnavailable("no venv in this test")


def test_worker_says_how_to_get_a_missing_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` raises ImportError
    assert worker.main([json.dumps({"engine": "ort-cpu", "precision": "fp32", "model_path": "unused.onnx"})]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert result["status"] == "unavailable"
    assert "pip install 'onyxia-cli[bench]'" in result["reason"] and sys.executable in result["reason"]


def test_uv_is_found_beside_the_interpreter_when_not_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`.venv/bin/onyxia bench` without an activated venv: PATH lacks .venv/bin, where .ci/setup put uv."""
    monkeypatch.setattr(runners.shutil, "which", lambda name: None)
    monkeypatch.setattr(runners.sys, "executable", str(tmp_path / "python"))
    assert runners.find_uv() is None
    uv = tmp_path / "uv"
    uv.write_text("#!/bin/sh\n")
    uv.chmod(0o755)
    assert runners.find_uv() == str(uv)
