"""The seed flow, end to end: load -> IR -> passes -> plan -> executor, checked against onnxruntime.

graph = onyxia.onnx.load_and_parse_model(path)
registry = onyxia.operators.core_operator_registry()
model = onyxia.compiler.CompilerPipeline(registry).compile(graph, dims)
outputs = onyxia.runtime.Runtime().load_model(model).run(inputs)
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onyxia.compiler
import onyxia.onnx
import onyxia.operators

RTOL, ATOL = 1e-4, 1e-5


def _seed_flow(runtime: Any, path: Path, inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    graph = onyxia.onnx.load_and_parse_model(path)
    registry = onyxia.operators.core_operator_registry()
    model = onyxia.compiler.CompilerPipeline(registry).compile(graph, dims)
    return dict(runtime.load_model(model).run(inputs))


def _assert_matches(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=name)


def _mixed_ops_model(path: Path) -> Path:
    """Embedding lookup, elementwise math and a Shape->Gather->Unsqueeze->Concat->Reshape chain.

    x[seq, 6] f32, ids[seq] i64 -> y[1, seq, 6], probs[1, seq, 3]; every op is a core op.
    """
    rng = np.random.default_rng(11)
    table = rng.standard_normal((10, 6)).astype(np.float32)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    init = [
        numpy_helper.from_array(table, "table"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "zero_index"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axis0"),
        numpy_helper.from_array(np.array([0, 2], dtype=np.int64), "axes02"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "lead"),
        numpy_helper.from_array(np.array([6], dtype=np.int64), "width"),
    ]
    node = helper.make_node
    nodes = [
        node("Gather", ["table", "ids"], ["emb"], name="embed"),
        node("Add", ["x", "emb"], ["h"]),
        node("Cos", ["h"], ["c"]),
        node("Mul", ["h", "h"], ["h2"]),
        node("Add", ["h2", "one"], ["h2p1"]),
        node("Sqrt", ["h2p1"], ["norm"]),
        node("Div", ["c", "norm"], ["ratio"]),
        node("Neg", ["ratio"], ["neg"]),
        node("Sub", ["neg", "h"], ["z"]),
        node("Shape", ["x"], ["x_shape"]),
        node("Gather", ["x_shape", "zero_index"], ["seq"], axis=0),
        node("Unsqueeze", ["seq", "axis0"], ["seq1"]),
        node("Concat", ["lead", "seq1", "width"], ["target"], axis=0),
        node("Reshape", ["z", "target"], ["z3"]),
        node("Cast", ["ids"], ["ids_f"], to=TensorProto.FLOAT),
        node("Unsqueeze", ["ids_f", "axes02"], ["ids_3"]),
        node("Add", ["z3", "ids_3"], ["y"]),
        node("MatMul", ["y", "w"], ["logits"]),
        node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed_ops",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", 6]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["seq"]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 6]),
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, "seq", 3]),
        ],
        init,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


def _mixed_inputs(seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seq)
    return {
        "x": rng.standard_normal((seq, 6)).astype(np.float32),
        "ids": rng.integers(0, 10, seq).astype(np.int64),
    }


def test_builtin_demo_model(runtime: Any, ort_run: Any) -> None:
    from onyxia.cli.common import builtin_inputs, model_path

    inputs = builtin_inputs()
    with model_path(None) as path:
        got = _seed_flow(runtime, path, inputs, {"sequence_length": inputs["x"].shape[1]})
        _assert_matches(got, ort_run(path, inputs))


@pytest.mark.parametrize("seq", [1, 7])
def test_mixed_core_ops_static_dims(runtime: Any, ort_run: Any, tmp_path: Path, seq: int) -> None:
    path = _mixed_ops_model(tmp_path / "mixed.onnx")
    inputs = _mixed_inputs(seq)
    _assert_matches(_seed_flow(runtime, path, inputs, {"seq": seq}), ort_run(path, inputs))


def test_mixed_core_ops_symbolic_dims_two_sizes(runtime: Any, ort_run: Any, tmp_path: Path) -> None:
    """One plan, `seq` left symbolic, run at two lengths through update_dimensions()."""
    path = _mixed_ops_model(tmp_path / "mixed.onnx")
    graph = onyxia.onnx.load_and_parse_model(path)
    model = onyxia.compiler.CompilerPipeline(onyxia.operators.core_operator_registry()).compile(graph, {})
    assert "seq" in model.symbols
    executor = runtime.load_model(model)
    for seq in (3, 12):
        inputs = _mixed_inputs(seq)
        executor.update_dimensions({"seq": seq})
        _assert_matches(dict(executor.run(inputs)), ort_run(path, inputs))


def test_onnx_round_trip_runs_the_same(runtime: Any, ort_run: Any, tmp_path: Path) -> None:
    """IR -> ONNX (to_onnx) -> file -> onnxruntime agrees with the original model."""
    path = _mixed_ops_model(tmp_path / "mixed.onnx")
    round_tripped = onyxia.onnx.to_onnx(onyxia.onnx.load_and_parse_model(path))
    onnx.save(round_tripped, tmp_path / "round_trip.onnx")
    inputs = _mixed_inputs(5)
    _assert_matches(ort_run(tmp_path / "round_trip.onnx", inputs), ort_run(path, inputs))


def test_onyxia_console_script_runs_the_builtin_model() -> None:
    script = shutil.which("onyxia")
    assert script is not None, "the onyxia console script is not on PATH"
    proc = subprocess.run([script, "run"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "attention" in proc.stdout and "[1, 4, 16]" in proc.stdout
