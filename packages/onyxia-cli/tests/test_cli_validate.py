"""`onyxia validate`: compiles without a GPU, lists every unsupported op, exits 1 on failure."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper


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


def _relu_model(path: Path, dims: list[int | str], **attrs: float) -> Path:
    op = "LeakyRelu" if attrs else "Relu"
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], name="node", **attrs)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_empty_tensor_value_info("y")],
    )
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), path)
    return path


def test_validate_reports_a_size_beyond_u32_at_compile_time(cli, tmp_path: Path) -> None:
    """Each dim of [2^30, 8] fits 32 bits, the element count the shader indexes does not: before, validate
    said ok and load failed inside naga ("literal not representable")."""
    result = cli("validate", str(_relu_model(tmp_path / "big.onnx", [2**30, 8])))
    assert result.code == 1, result.err
    assert result.err.startswith("error: node 'node' (Relu): shader 'elementwise/unary': dim N = 8589934592")
    assert "does not fit the kernels' 32-bit indices" in result.err
    assert "Traceback" not in result.err


def test_validate_accepts_an_infinite_attribute(cli, tmp_path: Path) -> None:
    """LeakyRelu alpha=inf (onnxruntime computes it) compiles to a bit-pattern literal, not `inf`."""
    result = cli("validate", str(_relu_model(tmp_path / "inf.onnx", ["n", 4], alpha=float("inf"))), "--dim", "n=2")
    assert result.code == 0, result.err


def test_a_plan_waiting_for_run_time_values_says_so(cli, tmp_path: Path) -> None:
    """ReduceSum's axes fed at run time set the kernel's structure: the plan is made per value at run(), so
    validate and compile say why they report no dispatches instead of a bare "0 dispatches"."""
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
    ]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "reduce_axes.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    for command in ("validate", "compile"):
        result = cli(command, str(path))
        assert result.code == 0, result.err
        assert "deferred: planning needs run-time values" in result.out
        assert "node 'ReduceSum_0' (ReduceSum) input 1 (axes) from graph input 'axes'" in result.out


def test_a_float64_plan_says_it_is_demoted(cli, tmp_path: Path) -> None:
    """float64 runs as f32 on the GPU: validate and compile say so in one line, naming the tensors."""
    node = helper.make_node("Exp", ["x"], ["y"], name="exp")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4])],
    )
    path = tmp_path / "exp64.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), path)
    for command in ("validate", "compile"):
        result = cli(command, str(path))
        assert result.code == 0, result.err
        assert "demoted: 2 tensors computed in a less precise type (double as f32)" in result.out
        assert "'x', 'y'" in result.out or "'y', 'x'" in result.out
        assert ".py:" not in result.err, "a warning printed in Python's file:line form"
