"""`onyxia embed MODEL_DIR --text ...`: JSON and table output, the saved array, and its refusals (exit 2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from embedding_cases import CLS, DATA, MEAN, assert_same_vectors, expected, texts, token_counts


def test_json_output_matches_sentence_transformers(cli: Callable[..., Any], tmp_path: Path) -> None:
    wanted = texts(MEAN)[:4]
    argv = [arg for text in wanted for arg in ("--text", text)]
    result = cli("embed", str(DATA / MEAN), *argv, "--format", "json", "--output", str(tmp_path / "v.npy"))
    assert result.code == 0, result.err
    body = json.loads(result.out.splitlines()[0])
    assert body["model"] == MEAN and [item["text"] for item in body["data"]] == wanted
    assert [item["tokens"] for item in body["data"]] == token_counts(MEAN)[:4]
    assert body["usage"]["prompt_tokens"] == sum(token_counts(MEAN)[:4])
    vectors = np.array([item["embedding"] for item in body["data"]], np.float32)
    assert_same_vectors(vectors, expected(MEAN)[:4], "onyxia embed --format json")
    assert_same_vectors(np.load(tmp_path / "v.npy"), expected(MEAN)[:4], "onyxia embed --output")


def test_table_output_and_dimensions(cli: Callable[..., Any]) -> None:
    result = cli("embed", str(DATA / MEAN), "--text", "hello", "--text", "the quick brown fox", "--dimensions", "8")
    assert result.code == 0, result.err
    assert "minilm-mean-tiny: 8 dimensions" in result.out
    assert "hello" in result.out and "1.0000" in result.out  # each row's norm: the model normalises


def test_refusals_exit_2_with_one_error_line(cli: Callable[..., Any]) -> None:
    result = cli("embed", str(DATA / CLS), "--text", "hello", "--dimensions", "8")
    assert result.code == 2
    assert "does not support 'dimensions'" in result.err and "Traceback" not in result.err
    missing = cli("embed", str(DATA / "gemma3-tiny"), "--text", "hello")
    assert missing.code == 1 and "modules.json: missing" in missing.err
    assert cli("embed", str(DATA / CLS)).code == 2  # --text is required
