"""`onyxia generate` and `onyxia chat`, in process and as a console script."""

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from llm_cases import DATA


def test_generate_demo_streams_text_and_reports_stats(cli: Callable[..., Any]) -> None:
    result = cli("generate", "--precision", "fp32", "--temperature", "0", "--max-new-tokens", "40")
    assert result.code == 0, result.err
    # onnxruntime's greedy output for this prompt (shared/fortune-gemma3/README.md)
    expected = "Life is a good thing to be a good thing to do is to be a good thing.\n\t\t-- Lazarus Long"
    assert result.out.startswith(expected)
    assert "prompt tokens" in result.err and "decode" in result.err and "tok/s" in result.err
    # one console for every command: the [fp32] tag survives (no markup in data) and the line is not wrapped
    stats_line = next(line for line in result.err.splitlines() if "prompt tokens" in line)
    assert stats_line.rstrip().endswith("[fp32]") and len(stats_line) > 80, result.err


def test_generate_stats_as_json(cli: Callable[..., Any]) -> None:
    model = str(DATA / "gemma3-tiny-optimum")
    result = cli("generate", model, "--prompt", "Hello", "--max-new-tokens", "5", "--stats", "json")
    assert result.code == 0, result.err
    stats = json.loads(result.out.strip().splitlines()[-1])
    assert stats["prompt_tokens"] >= 2 and stats["new_tokens"] == 5
    assert stats["decode_tokens_per_second"] > 0 and "llvmpipe" in stats["adapter"]


def test_generate_errors_are_one_line(cli: Callable[..., Any], tmp_path: Any) -> None:
    result = cli("generate", str(tmp_path), "--prompt", "x")
    assert result.code == 1 and "error:" in result.err and "no ONNX model found" in result.err
    assert "Traceback" not in result.err
    assert cli("generate", str(tmp_path)).code == 2


def test_chat_repl_resets_and_exits() -> None:
    code = "from onyxia.cli.main import main; raise SystemExit(main(['chat', '--max-new-tokens', '4', '--seed', '1']))"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input="hello\n/reset\nhi again\n/exit\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "conversation reset" in proc.stderr
    assert proc.stdout.count("> ") >= 3
