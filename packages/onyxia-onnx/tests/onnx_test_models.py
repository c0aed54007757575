"""Shared builders for the onyxia-onnx tests: small models written to tmp_path, and an ORT runner."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

__all__ = ["OPSET", "make_model", "run_ort", "save", "set_external", "tensor_input"]

OPSET = 21


def tensor_input(name: str, elem_type: int, dims: Sequence[int | str | None] | None) -> onnx.ValueInfoProto:
    """A tensor ValueInfo; `dims` None means no shape at all (unknown rank)."""
    return helper.make_tensor_value_info(name, elem_type, None if dims is None else list(dims))


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Sequence[TensorProto] = (),
    *,
    opsets: dict[str, int] | None = None,
    name: str = "test_graph",
) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), initializer=list(initializers))
    imports = [helper.make_opsetid(d, v) for d, v in (opsets or {"": OPSET}).items()]
    return helper.make_model(graph, opset_imports=imports, ir_version=10)


def save(model: onnx.ModelProto, tmp_path: Path, name: str = "model.onnx", **kwargs: object) -> Path:
    path = tmp_path / name
    onnx.save_model(model, str(path), **kwargs)
    return path


def run_ort(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    source = str(model) if isinstance(model, Path) else model.SerializeToString()
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def set_external(tensor: TensorProto, **keys: str) -> None:
    """Point `tensor` at external data with exactly these keys (onnx's helper insists on raw_data first)."""
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in keys.items():
        tensor.external_data.add(key=key, value=value)
