"""Every bad argument and bad file ends as one error line: the exit code, the problem named, no traceback.

Argument cases point at a model directory that does not exist: the parser must refuse them before
anything looks at it (were the model touched, the error would be "not a directory", exit 1).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from llm_cases import DATA
from onnx import TensorProto, helper

from onyxia.cli.commands import validate as validate_command

NEVER = "/nonexistent/onyxia-model-dir"  # a model path no argument case may reach

# (argv, expected text in the message); each must exit 2 from the parser
BAD_ARGUMENTS = [
    (["generate", NEVER, "--prompt", "x", "--top-p", "2"], "argument --top-p: expected a probability 0 < p <= 1"),
    (["generate", NEVER, "--prompt", "x", "--top-p", "0"], "argument --top-p"),
    (["generate", NEVER, "--prompt", "x", "--min-p", "1.5"], "argument --min-p: expected a number 0 <= x <= 1"),
    (["generate", NEVER, "--prompt", "x", "--frequency-penalty", "3"], "argument --frequency-penalty: expected"),
    (["generate", NEVER, "--prompt", "x", "--top-k", "-3"], "argument --top-k: expected an integer >= 0, got -3"),
    (["generate", NEVER, "--prompt", "x", "--temperature", "-1"], "argument --temperature: expected a number >= 0"),
    (["generate", NEVER, "--prompt", "x", "--temperature", "nan"], "argument --temperature: expected a finite number"),
    (["generate", NEVER, "--prompt", "x", "--seed", "-1"], "argument --seed: expected an integer >= 0, got -1"),
    (["chat", NEVER, "--repetition-penalty", "nan"], "argument --repetition-penalty: expected a finite number"),
    (["generate", NEVER, "--prompt", "x", "--max-new-tokens", "-5"], "argument --max-new-tokens"),
    (["generate", NEVER, "--prompt", "x", "--max-length", "0"], "argument --max-length: expected an integer >= 1"),
    (["generate", NEVER, "--prompt", "x", "--max-length", "2147483648"], "out of range"),
    (["generate", NEVER, "--prompt", "x", "--top-k", "٣"], "argument --top-k: expected an integer"),
    (["generate", NEVER, "--prompt", "ab\udcffcd"], "argument --prompt: not valid UTF-8"),
    (["run", NEVER, "--dim", "n=²"], "--dim 'n=²': expected an integer"),
    (["run", NEVER, "--dim", "n=99999999999999999999999"], "out of range; expected at most 2147483647"),
    (["run", NEVER, "--dim", "n=2147483648"], "out of range"),
    (["compile", NEVER, "--dim", "n=three"], "--dim 'n=three'"),
    (["validate", NEVER, "--dim", "n=2", "--dim", "n=3"], "--dim n is given twice with different values (2 and 3)"),
    (["run", NEVER, "--output", "/nonexistent/dir/out.npz"], "directory '/nonexistent/dir' does not exist"),
    (
        ["bench", "--json", "/nonexistent/dir/bench.json"],
        "argument --json: directory '/nonexistent/dir' does not exist",
    ),
    (["bench", "--timeout", "nan"], "argument --timeout: expected a finite number"),
    (["bench", "--decode-tokens", "0"], "argument --decode-tokens: expected an integer >= 1"),
]


def assert_one_line(result: Any, code: int, expected: str) -> None:
    assert result.code == code, (result.out, result.err)
    assert expected in result.err, result.err
    assert "Traceback" not in result.err and "Traceback" not in result.out
    # argparse prints its usage (indented continuation lines) before the one error line
    lines = [line for line in result.err.splitlines() if line.strip() and not line.startswith(("usage:", " "))]
    assert len(lines) == 1, result.err


@pytest.mark.parametrize(("argv", "expected"), BAD_ARGUMENTS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_bad_argument_is_refused_by_the_parser(cli: Callable[..., Any], argv: list[str], expected: str) -> None:
    assert_one_line(cli(*argv), 2, expected)


def test_output_whose_parent_is_a_file_is_refused_before_work(cli: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert_one_line(cli("run", NEVER, "--output", str(tmp_path / "file" / "o.npz")), 2, "does not exist")
    assert_one_line(cli("run", NEVER, "--output", str(tmp_path)), 2, "is a directory")


def _npy_header_claiming(path: Path, shape: tuple[int, ...]) -> Path:
    with path.open("wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
        f.write(b"\0" * 64)
    return path


# (file name, writer, expected text): run --input x=FILE, exit 2
BAD_NPY = [
    ("empty.npy", lambda p: p.write_bytes(b""), "is not a .npy array (the file is empty)"),
    ("huge.npy", lambda p: _npy_header_claiming(p, (2**20, 2**20)), "is truncated: its header says float32"),
    ("text.npy", lambda p: p.write_text("not an array"), "is not a .npy array"),
    (
        "short.npy",
        lambda p: np.save(p, np.zeros((2, 8), np.float32)) or p.write_bytes(p.read_bytes()[:-8]),
        "truncated",
    ),
]


@pytest.mark.parametrize(("name", "write", "expected"), BAD_NPY, ids=[c[0] for c in BAD_NPY])
def test_bad_npy_input_names_the_file_and_leaves_no_output(
    cli: Callable[..., Any], mlp_model: Path, tmp_path: Path, name: str, write: Any, expected: str
) -> None:
    path = tmp_path / name
    write(path)
    out = tmp_path / "out" / "o.npz"
    out.parent.mkdir()
    result = cli("run", str(mlp_model), "--input", f"x={path}", "--output", str(out))
    assert_one_line(result, 2, expected)
    assert f"--input x: '{path}'" in result.err
    assert list(out.parent.iterdir()) == []  # no output, no temporary left behind


def test_output_is_complete_and_no_temporary_is_left(cli: Callable[..., Any], mlp_model: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.ones((3, 8), np.float32))
    out = tmp_path / "out"
    out.mkdir()
    result = cli("run", str(mlp_model), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(out / "o"))
    assert result.code == 0, result.err
    assert [p.name for p in out.iterdir()] == ["o.npz"]  # numpy's naming rule, and no .tmp beside it
    with np.load(out / "o.npz") as saved:
        assert saved["probs"].shape == (3, 4)


def _edit_json(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def _set_genai(path: Path) -> None:
    data = json.loads(path.read_text())
    data["model"]["context_length"] = "big"
    path.write_text(json.dumps(data))


# (fixture dir, file, corruption, expected text): generate exits 1 naming file and key, before compiling
BAD_MODEL_FILES = [
    ("gemma3-tiny-optimum", "config.json", lambda p: _edit_json(p, max_position_embeddings="lots"),
     "config.json: max_position_embeddings is 'lots'; expected a positive integer"),
    ("gemma3-tiny-optimum", "generation_config.json", lambda p: _edit_json(p, eos_token_id="x"),
     "generation_config.json: eos_token_id is 'x'; expected a token id"),
    ("gemma3-tiny-optimum", "config.json", lambda p: p.write_text("{not json"), "config.json: not valid JSON"),
    ("gemma3-tiny-optimum", "tokenizer_config.json", lambda p: p.write_text("[1, 2]"),
     "tokenizer_config.json: expected a JSON object, found list"),
    ("gemma3-tiny-optimum", "tokenizer_config.json", lambda p: _edit_json(p, bos_token=5), "bos_token is 5"),
    ("gemma3-tiny-optimum", "tokenizer.json", lambda p: p.write_text('{"model": 5}'), "cannot load the tokenizer"),
    ("gemma3-tiny-optimum", "chat_template.jinja", lambda p: p.write_text("{% if messages %}never closed"),
     "chat_template.jinja: chat template line 1"),
    ("gemma3-tiny-genai/fp32", "genai_config.json", _set_genai,
     "genai_config.json: model.context_length is 'big'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("directory", "name", "corrupt", "expected"), BAD_MODEL_FILES, ids=[f"{c[0]}:{c[1]}" for c in BAD_MODEL_FILES]
)
def test_bad_model_file_names_file_and_key(
    cli: Callable[..., Any], tmp_path: Path, directory: str, name: str, corrupt: Any, expected: str
) -> None:
    root = tmp_path / "model"
    shutil.copytree(DATA / directory, root)
    corrupt(root / name)
    assert_one_line(cli("generate", str(root), "--prompt", "hi", "--max-new-tokens", "1"), 1, expected)


def test_deeply_nested_symbolic_dim_is_not_a_traceback(cli: Callable[..., Any], tmp_path: Path) -> None:
    dim = "(" * 3000 + "n" + ")" * 3000
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "deep",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [dim])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, tmp_path / "deep.onnx")
    result = cli("validate", str(tmp_path / "deep.onnx"))
    assert result.code == 0, result.err  # an unparsable dim string is an opaque symbol, as ONNX allows
    assert "Traceback" not in result.err


def test_internal_error_is_one_line_with_a_debug_hint(
    cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, mlp_model: Path
) -> None:
    def broken(args: Any, console: Any) -> int:
        raise RuntimeError("an invariant\nspanning lines")

    monkeypatch.setattr(validate_command, "run", broken)
    result = cli("validate", str(mlp_model))
    assert_one_line(result, 1, "internal error: RuntimeError: an invariant spanning lines")
    assert "rerun with --debug 1 for the traceback" in result.err
    debug = cli("--debug", "1", "validate", str(mlp_model))
    assert debug.code == 1 and "Traceback" in debug.err and "broken" in debug.err


def test_chat_survives_bad_and_overlong_turns(tmp_path: Path) -> None:
    """A line that is not UTF-8 and a turn longer than --max-length each cost one error line; the
    chat reads on, dropping old turns when the conversation outgrows the cache."""
    code = (
        "from onyxia.cli.main import main; raise SystemExit(main(['chat', '--max-length', '64', "
        "'--max-new-tokens', '6', '--seed', '1']))"
    )
    turns = [b"hello", b"caf\xe9 \xff", b"word " * 80, b"one", b"two", b"three", b"four", b"five", b"/exit"]
    proc = subprocess.run(
        [sys.executable, "-c", code], input=b"\n".join(turns) + b"\n", capture_output=True, timeout=300
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "error: the chat text is not valid UTF-8" in err
    assert "more than max_length 64 leaves for an answer" in err
    assert "earlier message(s) to fit --max-length" in err
    assert proc.stdout.decode().count("> ") == len(turns)  # every turn was read
