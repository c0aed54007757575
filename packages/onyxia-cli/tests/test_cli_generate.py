"""`onyxia generate` and `onyxia chat`, in process and as a console script."""

import importlib.resources
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


def test_generate_passes_min_p_and_openais_penalties(cli: Callable[..., Any]) -> None:
    """The flags reach the sampler: the text is the session's with the same SamplingParams (greedy, so the
    demo's loop of "a good thing" is what the penalties break)."""
    from onyxia.cli.commands.generate import DEMO_PROMPT
    from onyxia.cli.commands.llm_options import DEMO_MODEL_DIR
    from onyxia.cli.llm import LlmSession, SamplingParams

    flags = ["--temperature", "0", "--min-p", "0.05", "--presence-penalty", "0.6", "--frequency-penalty", "0.8"]
    result = cli("generate", "--precision", "fp32", "--max-new-tokens", "30", *flags)
    assert result.code == 0, result.err
    demo = importlib.resources.files("onyxia.cli.data") / DEMO_MODEL_DIR
    with importlib.resources.as_file(demo) as root:
        llm = LlmSession.from_pretrained(root, "fp32")
    params = SamplingParams(min_p=0.05, presence_penalty=0.6, frequency_penalty=0.8)
    ids = llm.tokenizer.encode(DEMO_PROMPT)
    tokens = list(llm.generate_ids(ids, 30, params, stop=llm.model_dir.eos_token_ids))
    text = llm.tokenizer.decode([t for t in tokens if t not in llm.model_dir.eos_token_ids])
    assert result.out.startswith(DEMO_PROMPT + text) and "a good thing to be a good thing" not in result.out


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
