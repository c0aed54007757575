"""Graph input dims read as onnxruntime reads them: `-1` (paddle2onnx), `?`, an empty `dim_param` and a
dim with neither value nor name are each a dim of their own; only a real `dim_param` name joins dims.

(Running such a model against onnxruntime: tests/test_e2e_input_dims.py.) A PaddleOCR recogniser declares its image input ``[-1, 3, ?, ?]``: a 48x192 crop must bind the two
``?`` dims separately (when they were one symbol the run refused "dim 3 is 192; expected 48").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx_test_models import make_model, save

from onyxia.core import Absent, IrGraph, SymbolicDim, SymbolicExpr
from onyxia.onnx import load_and_parse_model

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
    return make_model(nodes, inputs, outputs)


def _input_dims(graph: IrGraph, name: str) -> list[SymbolicDim]:
    tensor = graph.tensor_by_name(name)
    assert tensor is not None and not isinstance(tensor.shape, Absent), f"input {name} has no shape"
    return list(tensor.shape.dims)


def test_each_unknown_dim_is_its_own_symbol(tmp_path: Path) -> None:
    graph = load_and_parse_model(save(_unknown_dims_model(), tmp_path))
    image, mask = _input_dims(graph, "image"), _input_dims(graph, "mask")
    unknown = [image[0], image[2], image[3], *mask]
    assert all(isinstance(d, SymbolicExpr) for d in unknown)
    assert len(set(unknown)) == 5, f"unknown dims share symbols: {unknown}"
    assert image[1] == 3
    assert _input_dims(graph, "a")[0] == _input_dims(graph, "b")[0]
