"""`onyxia validate`: compiles without a GPU, lists every unsupported op, exits 1 on failure."""

from __future__ import annotations

from pathlib import Path


def test_validate_ok(cli, mlp_model: Path) -> None:
    result = cli("validate", str(mlp_model))
    assert result.code == 0, result.err
    assert result.out.startswith("ok:")
    assert "symbolic dims left for run time: n" in result.out


def test_validate_with_bound_dim_leaves_nothing_symbolic(cli, mlp_model: Path) -> None:
    result = cli("validate", str(mlp_model), "--dim", "n=3")
    assert result.code == 0, result.err
    assert "symbolic" not in result.out


def test_validate_lists_every_unsupported_op(cli, unsupported_model: Path) -> None:
    result = cli("validate", str(unsupported_model))
    assert result.code == 1
    assert "Frobnicate" in result.out and "Twiddle" in result.out
    assert "frob_0" in result.out and "twiddle_0" in result.out
    assert "Add" not in result.out
    assert result.err.startswith("error: 2 unsupported op type(s) in 3 node(s)")
    assert "Traceback" not in result.err


def test_validate_reports_shape_errors(cli, shape_error_model: Path) -> None:
    result = cli("validate", str(shape_error_model))
    assert result.code == 1
    assert result.err.startswith("error:")
    assert "Traceback" not in result.err


def test_validate_rejects_malformed_dims(cli, mlp_model: Path) -> None:
    result = cli("validate", str(mlp_model), "--dim", "n=three")
    assert result.code == 2
    assert "--dim 'n=three'" in result.err


def test_validate_needs_no_gpu(cli_subprocess, mlp_model: Path) -> None:
    """With wgpu made unimportable, validate still compiles (it never imports onyxia.runtime)."""
    result = cli_subprocess("validate", str(mlp_model), prelude="import sys; sys.modules['wgpu'] = None")
    assert result.code == 0, result.err
    assert result.out.startswith("ok:")
