"""`onyxia inspect`: tables of inputs, outputs, opsets, ops (with support) and parameters."""

from __future__ import annotations

from pathlib import Path


def test_inspect_lists_io_ops_opsets_and_parameters(cli, mlp_model: Path) -> None:
    result = cli("inspect", str(mlp_model))
    assert result.code == 0, result.err
    out = result.out
    for expected in ("Inputs", "Outputs", "x", "[n,8]", "probs", "logits", "MatMul", "Softmax", "ai.onnx", "17"):
        assert expected in out
    assert "Parameters: 36 (144 B)" in out
    assert "Symbolic dims: n" in out


def test_inspect_defaults_to_the_builtin_model(cli) -> None:
    result = cli("inspect")
    assert result.code == 0, result.err
    assert "tiny_attention" in result.out
    assert "sequence_length" in result.out


def test_inspect_marks_unsupported_ops(cli, unsupported_model: Path) -> None:
    result = cli("inspect", str(unsupported_model))
    assert result.code == 0, result.err
    frob = next(line for line in result.out.splitlines() if "Frobnicate" in line)
    assert " 2 " in frob and "no" in frob


def test_inspect_missing_file_is_a_one_line_error(cli, tmp_path: Path) -> None:
    result = cli("inspect", str(tmp_path / "nope.onnx"))
    assert result.code == 1
    assert result.err.startswith("error:")
    assert "nope.onnx" in result.err
    assert "Traceback" not in result.err
