"""An attention block with a symbolic sequence length, end to end on lavapipe, against onnxruntime."""

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from models import attention_block
from oracle import assert_close, runtime

import onyxia.compiler
import onyxia.onnx
import onyxia.operators
import onyxia.runtime


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "attention.onnx"
    onnx.save_model(attention_block(), path)
    return path


def _reference(path: Path, ids: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"ids": ids})[0]


def test_attention_block_matches_onnxruntime(model_path: Path) -> None:
    ids = np.random.default_rng(1).integers(0, 32, (1, 7)).astype(np.int64)
    graph = onyxia.onnx.load_and_parse_model(model_path)
    registry = onyxia.operators.core_operator_registry()
    model = onyxia.compiler.CompilerPipeline(registry).compile(graph, {"batch_size": 1, "sequence_length": 7})
    executor = onyxia.runtime.Runtime().load_model(model)
    outputs = executor.run({"ids": ids})
    assert_close(outputs["y"], _reference(model_path, ids), "y")


def test_symbolic_sequence_length_without_recompiling(model_path: Path) -> None:
    graph = onyxia.onnx.load_and_parse_model(model_path)
    model = onyxia.compiler.compile(graph, onyxia.operators.core_operator_registry(), {"batch_size": 1})
    assert model.symbols == {"sequence_length"}
    # the shape chain folded: no Shape/Gather/Concat op reached the plan
    assert not {op.op_type for op in model.operations} & {"Shape", "Concat", "Constant"}
    executor = runtime().load_model(model, max_dims={"sequence_length": 16})
    rng = np.random.default_rng(2)
    first = rng.integers(0, 32, (1, 9)).astype(np.int64)
    assert_close(executor.run({"ids": first})["y"], _reference(model_path, first), "y (seq 9)")
    modules, pipelines = executor.stats.shader_modules_created, executor.stats.pipelines_created
    for seq in (3, 1, 12):
        executor.update_dimensions({"sequence_length": seq})
        ids = rng.integers(0, 32, (1, seq)).astype(np.int64)
        assert_close(executor.run({"ids": ids})["y"], _reference(model_path, ids), f"y (seq {seq})")
    assert executor.stats.shader_modules_created == modules
    assert executor.stats.pipelines_created == pipelines
