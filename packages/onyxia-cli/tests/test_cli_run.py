"""`onyxia run`: outputs match onnxruntime, inputs are checked, errors are one line."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

from onyxia.cli.common import builtin_inputs, model_path


def test_run_builtin_model_matches_onnxruntime(cli, reference, tmp_path: Path) -> None:
    out_file = tmp_path / "out.npz"
    result = cli("run", "--output", str(out_file))
    assert result.code == 0, result.err
    assert "y" in result.out and "attention" in result.out and "[1, 4, 16]" in result.out
    with model_path(None) as path:
        expected = reference(path, builtin_inputs())
    with np.load(out_file) as got:
        assert sorted(got.files) == sorted(expected)
        for name, value in expected.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_run_builtin_model_with_own_input(cli, reference, tmp_path: Path) -> None:
    x = np.random.default_rng(3).standard_normal((1, 9, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out_file = tmp_path / "out.npz"
    result = cli("run", "--input", f"x={tmp_path / 'x.npy'}", "--output", str(out_file))
    assert result.code == 0, result.err
    with model_path(None) as path:
        expected = reference(path, {"x": x})
    with np.load(out_file) as got:
        np.testing.assert_allclose(got["y"], expected["y"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [1, 5])
def test_run_model_file_matches_onnxruntime(cli, reference, mlp_model: Path, tmp_path: Path, n: int) -> None:
    x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = cli("run", str(mlp_model), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "o.npz"))
    assert result.code == 0, result.err
    assert "probs" in result.out and f"[{n}, 4]" in result.out
    expected = reference(mlp_model, {"x": x})
    with np.load(tmp_path / "o.npz") as got:
        for name in ("probs", "logits"):
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_run_missing_input_is_an_error_for_a_model_file(cli, mlp_model: Path) -> None:
    result = cli("run", str(mlp_model))
    assert result.code == 2
    assert result.err.startswith("error: missing input(s) x (float[n,8])")


def test_run_rejects_unknown_and_mistyped_inputs(cli, mlp_model: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x64.npy", np.zeros((2, 8)))
    unknown = cli("run", str(mlp_model), "--input", f"z={tmp_path / 'x64.npy'}")
    assert unknown.code == 2 and "unknown input(s) ['z']" in unknown.err
    mistyped = cli("run", str(mlp_model), "--input", f"x={tmp_path / 'x64.npy'}")
    assert mistyped.code == 2 and "dtype float64" in mistyped.err
    unreadable = cli("run", str(mlp_model), "--input", f"x={tmp_path / 'missing.npy'}")
    assert unreadable.code == 2 and "cannot read" in unreadable.err


def test_run_rejects_conflicting_dims(cli, mlp_model: Path, tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((2, 8), dtype=np.float32))
    result = cli("run", str(mlp_model), "--input", f"x={tmp_path / 'x.npy'}", "--dim", "n=3")
    assert result.code == 2
    assert "already bound to 3" in result.err


def test_run_as_subprocess(cli_subprocess) -> None:
    result = cli_subprocess("run")
    assert result.code == 0, result.err
    assert "Outputs" in result.out and "attention" in result.out


def test_errors_in_a_subprocess_have_no_traceback(cli_subprocess, tmp_path: Path) -> None:
    result = cli_subprocess("run", str(tmp_path / "missing.onnx"))
    assert result.code == 1
    assert result.err.startswith("error:") and "Traceback" not in result.err


def test_console_script_is_declared() -> None:
    (script,) = entry_points(group="console_scripts", name="onyxia")
    assert script.value == "onyxia.cli.main:main"
