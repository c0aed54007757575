"""Graph input dims read as onnxruntime reads them: `-1` (paddle2onnx), `?`, an empty `dim_param` and a
dim with neither value nor name are each a dim of their own; only a real `dim_param` name joins dims.

Run end to end here (the loader's side is `packages/onyxia-onnx/tests/test_onnx_input_dims.py`).
A PaddleOCR recogniser declares its image input ``[-1, 3, ?, ?]``: a 48x192 crop must bind the two
``?`` dims separately (when they were one symbol the run refused "dim 3 is 192; expected 48").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onyxia.compiler import CompilerPipeline
from onyxia.core import InputError
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry

RNG = np.random.default_rng(16)


def _dims(info: onnx.ValueInfoProto, dims: list[int | str | None]) -> onnx.ValueInfoProto:
    """Set each dim of `info`: an int is a dim_value (negative included), a str a dim_param (empty
    included), None a dim with neither."""
    shape = info.type.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        dim = shape.dim.add()
        if isinstance(d, int):
            dim.dim_value = d
        elif isinstance(d, str):
            dim.dim_param = d
    return info


def _unknown_dims_model() -> onnx.ModelProto:
    """image [-1, 3, ?, ?] -> Relu -> Transpose (so the two ? dims must stay apart); mask ['', None]
    -> Mul; a, b ['batch', 4] (a real name) -> Add."""
    nodes = [
        helper.make_node("Relu", ["image"], ["r"]),
        helper.make_node("Transpose", ["r"], ["image_t"], perm=[0, 1, 3, 2]),
        helper.make_node("Mul", ["mask", "mask"], ["mask_sq"]),
        helper.make_node("Add", ["a", "b"], ["sum"]),
    ]
    info = helper.make_tensor_value_info
    inputs = [
        _dims(info("image", TensorProto.FLOAT, None), [-1, 3, "?", "?"]),
        _dims(info("mask", TensorProto.FLOAT, None), ["", None]),
        info("a", TensorProto.FLOAT, ["batch", 4]),
        info("b", TensorProto.FLOAT, ["batch", 4]),
    ]
    outputs = [info(name, TensorProto.FLOAT, None) for name in ("image_t", "mask_sq", "sum")]
    return helper.make_model(
        helper.make_graph(nodes, "dims", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )


def _save(model: onnx.ModelProto, tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


def _run_ort(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return list(ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds))


def _executor(runtime: Any, path: Path) -> Any:
    graph = load_and_parse_model(path)
    return runtime.load_model(CompilerPipeline(core_operator_registry()).compile(graph, {}))


def test_runs_a_48x192_image_like_onnxruntime(runtime: Any, tmp_path: Path) -> None:
    path = _save(_unknown_dims_model(), tmp_path)
    executor = _executor(runtime, path)
    for image_shape, mask_shape, batch in (((1, 3, 48, 192), (5, 7), 2), ((2, 3, 48, 320), (1, 3), 5)):
        feeds = {
            "image": RNG.standard_normal(image_shape).astype(np.float32),
            "mask": RNG.standard_normal(mask_shape).astype(np.float32),
            "a": RNG.standard_normal((batch, 4)).astype(np.float32),
            "b": RNG.standard_normal((batch, 4)).astype(np.float32),
        }
        got = executor.run(feeds)
        for name, expected in zip(("image_t", "mask_sq", "sum"), _run_ort(path, feeds)):
            assert got[name].shape == expected.shape
            np.testing.assert_allclose(got[name], expected, rtol=1e-6, atol=1e-6)


def test_a_real_name_still_binds_one_dim(runtime: Any, tmp_path: Path) -> None:
    executor = _executor(runtime, _save(_unknown_dims_model(), tmp_path))
    feeds = {
        "image": np.zeros((1, 3, 4, 6), np.float32),
        "mask": np.zeros((2, 2), np.float32),
        "a": np.zeros((3, 4), np.float32),
        "b": np.zeros((2, 4), np.float32),
    }
    with pytest.raises(InputError, match=r"'b'.*batch|batch.*'b'"):
        executor.run(feeds)
