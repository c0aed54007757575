"""`ComputePassBatchingPass` end to end: a plan whose copies it regroups runs as onnxruntime does, at
two sequence lengths, and records fewer command segments than the planner's order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from oracle import assert_close, runtime

from onyxia.compiler import CompilerPipeline
from onyxia.compiler.passes.compute_pass_batching import count_segments
from onyxia.core import CompiledModel
from onyxia.core.settings import override
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry
from onyxia.runtime.commands import ComputePass, CopyCommand


def _branches(hidden: int = 8, seed: int = 0) -> onnx.ModelProto:
    """q and k projections, each reshaped to heads, then combined: the exporter lists each Reshape
    right after its MatMul, so the planner's order alternates passes and copies."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(rng.standard_normal((hidden, hidden)).astype(np.float32), "wq"),
        numpy_helper.from_array(rng.standard_normal((hidden, hidden)).astype(np.float32), "wk"),
        numpy_helper.from_array(np.array([0, 0, 2, hidden // 2], np.int64), "heads"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("Reshape", ["q", "heads"], ["q4"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("Reshape", ["k", "heads"], ["k4"]),
        helper.make_node("Mul", ["q4", "k4"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "branches",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "sequence_length", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "sequence_length", 2, hidden // 2])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _compile(path: Path, batch: bool) -> CompiledModel:
    registry = core_operator_registry()
    registry.passes[:] = []  # no aliasing (the Reshapes stay copies), no MatMul grouping
    with override(batch_passes=batch):
        return CompilerPipeline(registry).compile(load_and_parse_model(path), {})


def test_batched_plan_matches_onnxruntime(tmp_path: Path) -> None:
    import onnxruntime as ort

    path = tmp_path / "branches.onnx"
    onnx.save_model(_branches(), path)
    planned, batched = _compile(path, False), _compile(path, True)
    assert [op.op_type for op in planned.operations] == ["MatMul", "Reshape", "MatMul", "Reshape", "Mul"]
    assert [op.op_type for op in batched.operations] == ["MatMul", "MatMul", "Reshape", "Reshape", "Mul"]
    assert count_segments(batched) == count_segments(planned) - 1
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    executor = runtime().load_model(batched)
    for seq in (5, 1, 9):
        x = np.random.default_rng(seq).standard_normal((1, seq, 8)).astype(np.float32)
        assert_close(executor.run({"x": x})["y"], session.run(None, {"x": x})[0], f"y (seq {seq})")
    segments = executor._program.segments
    assert sum(isinstance(s, CopyCommand) for s in segments) == 2  # the two copies, adjacent
    assert sum(isinstance(s, ComputePass) for s in segments) == 2
