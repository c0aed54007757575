"""Model builders for the onyxia.ort tests (onnx.helper): imported by name from this folder (`ort_models`),
never through `conftest`, which under nox's importlib mode is the package's top tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import helper


def make_model(
    nodes: list, inputs: list, outputs: list, initializers: list | None = None, opset: int = 17
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def value(name: str, dtype: int, dims: list | None) -> onnx.ValueInfoProto:
    """A tensor value_info whose dims may be ints, dim_param strings, or None (a dim with neither)."""
    info = helper.make_tensor_value_info(name, dtype, None)
    if dims is None:
        return info
    shape = info.type.tensor_type.shape
    shape.SetInParent()
    for d in dims:
        dim = shape.dim.add()
        if isinstance(d, int):
            dim.dim_value = d
        elif isinstance(d, str):
            dim.dim_param = d
    return info


def save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, path)
    return path
