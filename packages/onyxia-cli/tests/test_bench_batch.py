"""`onyxia bench --batch 1,2,3`: Onyxia's aggregate decode with N streams decoding together, per N, in the JSON and
the tables; onnxruntime stays single-stream, and stream 0's greedy ids (the single-stream prompt) equal
onnxruntime's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from onyxia.cli.bench.batched import stream_prompts
from onyxia.cli.bench.suite import prompt_ids
from onyxia.core.settings import override

DECODE = 6
POSITIVE = ("aggregate_decode_tok_s", "per_stream_decode_tok_s", "decode_s", "vs_single", "peak_rss_bytes")


def test_batch_reports_aggregate_decode_per_stream_count(cli: Callable[..., Any], tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    with override(cache_dir=tmp_path / "cache"):
        result = cli(
            "bench", "--size", "tiny", "--precision", "fp32", "--engines", "onyxia,ort-cpu", "--batch", "3,1,2",
            "--prompt-tokens", "8", "--decode-tokens", str(DECODE), "--prefill-tokens", "8", "--json", str(out),
        )  # fmt: skip
    assert result.code == 0, result.err
    doc = json.loads(out.read_text())
    assert doc["settings"]["batches"] == [1, 2, 3]
    part = doc["precisions"]["fp32"]
    single, ort = part["engines"]["onyxia"], part["engines"]["ort-cpu"]
    assert "batched" not in single and "batched" not in ort  # moved to the part's list; onnxruntime has none
    rows = part["batched"]
    assert [row["streams"] for row in rows] == [1, 2, 3]
    for row in rows:
        assert row["status"] == "ok", row.get("reason")
        assert all(row[key] > 0 for key in POSITIVE), row
        n = row["streams"]
        assert row["rows_per_step"] == n  # every timed step advanced all n streams in one run
        assert row["decode_steps"] == DECODE and row["decode_tokens"] == n * DECODE
        assert row["per_stream_decode_tok_s"] == pytest.approx(row["aggregate_decode_tok_s"] / n)
        assert row["stream0_tokens"] == ort["tokens"]  # onnxruntime's greedy ids for the same prompt
        assert row["kv_capacity_bytes"] == n * single["kv_capacity_bytes"]  # the session held n slots
    assert rows[0]["vs_single"] == 1.0
    for row in rows[1:]:
        assert row["vs_single"] == pytest.approx(row["aggregate_decode_tok_s"] / rows[0]["aggregate_decode_tok_s"])
    assert rows[2]["plan_cached"]  # 3 slots load the batched plan 2 slots compiled (its load figures still come)
    assert "Onyxia batched decode" in result.out and "single-stream" in result.out
    assert "batch of 3" in result.out


def test_stream_prompts_grow_by_one_and_share_only_bos() -> None:
    prompts = stream_prompts([prompt_ids(8 + i, 1024) for i in range(4)], 1024)
    assert prompts[0] == prompt_ids(8, 1024) and [len(p) for p in prompts] == [8, 9, 10, 11]
    assert all(p[0] == 2 and all(7 <= t < 1024 for t in p[1:]) for p in prompts)
    assert len({p[1] for p in prompts}) == 4


@pytest.mark.parametrize("text", ["0", "2,x", ",", "-1"])
def test_bad_batch_list_is_an_input_error(cli: Callable[..., Any], text: str) -> None:
    result = cli("bench", "--size", "tiny", "--engines", "onyxia", "--batch", text)
    assert result.code == 2 and "--batch" in result.err


def test_batch_profile_reports_each_batched_steps_host_split(cli: Callable[..., Any], tmp_path: Path) -> None:
    """`--batch 1,2 --profile`: each N's profiled batched steps carry the host split (dims, inputs, encode) that
    the single-stream profile prints, in the JSON and as a column of the batched table."""
    out = tmp_path / "bench.json"
    with override(cache_dir=tmp_path / "cache"):
        result = cli(
            "bench", "--size", "tiny", "--precision", "fp32", "--engines", "onyxia", "--batch", "1,2", "--profile",
            "--prompt-tokens", "8", "--decode-tokens", "4", "--prefill-tokens", "8", "--json", str(out),
        )  # fmt: skip
    assert result.code == 0, result.err
    rows = json.loads(out.read_text())["precisions"]["fp32"]["batched"]
    assert [row["streams"] for row in rows] == [1, 2]
    for row in rows:
        assert row["status"] == "ok", row.get("reason")
        profile = row["profile"]
        assert profile["steps"] == 4 and profile["dispatches_per_step"] > 0  # the bench's default profile steps
        for key in ("host_dims_ms_per_step", "host_prepare_ms_per_step", "host_encode_ms_per_step", "gpu_ms_per_step"):
            assert profile[key] > 0, (key, profile)
    assert "host ms/step (dims, inputs, encode)" in result.out
