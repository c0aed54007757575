"""The loader's side of input dims as onnxruntime reads them (run end to end: tests/test_e2e_input_dims.py):
`-1`, `?`, an empty `dim_param` and a dim with neither value nor name are each a symbol of their own."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper
from onnx_test_models import make_model, save

from onyxia.core import Absent, IrGraph, SymbolicDim, SymbolicExpr
from onyxia.onnx import load_and_parse_model


def _model() -> onnx.ModelProto:
    """Inputs image [-1, 3, ?, ?], mask ['', no name], a and b ['batch', 4]; each passed through."""
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [-1, 3, "?", "?"])
    mask = helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["", 1])
    mask.type.tensor_type.shape.dim[1].Clear()  # a dim with neither value nor name
    inputs = [image, mask, *(helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4]) for n in "ab")]
    nodes = [helper.make_node("Identity", [i.name], [f"{i.name}_out"]) for i in inputs]
    outputs = [helper.make_tensor_value_info(f"{i.name}_out", TensorProto.FLOAT, None) for i in inputs]
    return make_model(nodes, inputs, outputs)


def _input_dims(graph: IrGraph, name: str) -> list[SymbolicDim]:
    tensor = graph.tensor_by_name(name)
    assert tensor is not None and not isinstance(tensor.shape, Absent), f"input {name} has no shape"
    return list(tensor.shape.dims)


def test_each_unknown_dim_is_its_own_symbol(tmp_path: Path) -> None:
    graph = load_and_parse_model(save(_model(), tmp_path))
    image, mask = _input_dims(graph, "image"), _input_dims(graph, "mask")
    unknown = [image[0], image[2], image[3], *mask]
    assert all(isinstance(d, SymbolicExpr) for d in unknown)
    assert len(set(unknown)) == 5, f"unknown dims share symbols: {unknown}"
    assert image[1] == 3
    assert _input_dims(graph, "a")[0] == _input_dims(graph, "b")[0]
