"""onnxruntime's Python-API test models (onnxruntime/test/testdata/*.onnx), rebuilt with onnx.helper.

The ported tests (tests/ort/test_ort_python_port.py, ..._iobinding_port.py) load the models onnxruntime's
own tests load. Each is a graph of one to four nodes, so it is rebuilt here from what onnxruntime's tests
assert about it (names, shapes, types, initializer values, metadata) instead of copying binaries: the
tests build them into a temporary folder at session start (`write_all`), and `python make_models.py DIR`
writes them for inspection. Where onnxruntime's file records something its tests never read (producer,
IR version), the value here is a plain choice, noted on the builder. See README.md beside this file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["MODELS", "write_all"]

_FLOAT = TensorProto.FLOAT


def _model(graph: onnx.GraphProto, opset: int = 13, ir_version: int = 7, **fields: str) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **fields)
    model.ir_version = ir_version
    return model


def _mul_1() -> onnx.ModelProto:
    """Y = X * W, X float [3, 2], W the initializer [[1, 2], [3, 4], [5, 6]] (not a graph input).

    onnxruntime's tests: X*X for X = W ([[1, 4], [9, 16], [25, 36]]); a SessionOptions.add_initializer
    override of "W" changes the product, so W is an initializer named "W".
    """
    w = numpy_helper.from_array(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "W"], ["Y"], name="mul_0")],
        "mul_1",
        [helper.make_tensor_value_info("X", _FLOAT, [3, 2])],
        [helper.make_tensor_value_info("Y", _FLOAT, [3, 2])],
        [w],
    )
    return _model(graph)


def _matmul(x_rows: int | str) -> onnx.ModelProto:
    """Y = X @ W, W = [[1], [2]]: matmul_1 (X [3, 2]) and matmul_2 (X ["None", 2], a dim named "None")."""
    w = numpy_helper.from_array(np.array([[1.0], [2.0]], dtype=np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul_0")],
        "matmul",
        [helper.make_tensor_value_info("X", _FLOAT, [x_rows, 2])],
        [helper.make_tensor_value_info("Y", _FLOAT, [x_rows, 1])],
        [w],
    )
    return _model(graph)


def _logicaland() -> onnx.ModelProto:
    """output:0 = And(input:0, input1:0), bool [2, 2]; the graph lists input1:0 first (tf2onnx's order)."""
    graph = helper.make_graph(
        [helper.make_node("And", ["input:0", "input1:0"], ["output:0"], name="output")],
        "test",
        [
            helper.make_tensor_value_info("input1:0", TensorProto.BOOL, [2, 2]),
            helper.make_tensor_value_info("input:0", TensorProto.BOOL, [2, 2]),
        ],
        [helper.make_tensor_value_info("output:0", TensorProto.BOOL, [2, 2])],
    )
    return _model(graph, producer_name="tf2onnx", producer_version="0.0.2.0")


def _abs_free_dimensions() -> onnx.ModelProto:
    """y = Abs(x), x float [Dim1, Dim2, 5] whose free dims carry the denotations DATA_BATCH, DATA_CHANNEL."""
    x = helper.make_tensor_value_info("x", _FLOAT, ["Dim1", "Dim2", 5])
    y = helper.make_tensor_value_info("y", _FLOAT, ["Dim1", "Dim2", 5])
    for value in (x, y):
        dims = value.type.tensor_type.shape.dim
        dims[0].denotation = "DATA_BATCH"
        dims[1].denotation = "DATA_CHANNEL"
    graph = helper.make_graph([helper.make_node("Abs", ["x"], ["y"])], "test_abs", [x], [y])
    return _model(graph, producer_name="backend-test")


def _squeezenet_meta() -> onnx.ModelProto:
    """The metadata test_model_meta reads from ../models/opset8/test_squeezenet (a zoo model not in the repo).

    Only the metadata matters to that test, so one Relu carries it: producer "onnx-caffe2", graph
    "squeezenet_old", empty domain, model and graph doc strings.
    """
    graph = helper.make_graph(
        [helper.make_node("Relu", ["data_0"], ["softmaxout_1"])],
        "squeezenet_old",
        [helper.make_tensor_value_info("data_0", _FLOAT, [1, 4])],
        [helper.make_tensor_value_info("softmaxout_1", _FLOAT, [1, 4])],
    )
    return _model(graph, opset=8, ir_version=3, producer_name="onnx-caffe2")


def _external_initializer_from_user() -> onnx.ModelProto:
    """Y = Pad(X, Pads_not_on_disk, mode=constant); the pads initializer's data lives in an external file
    "Pads_not_on_disk.bin" that does not exist: the user supplies it (add_external_initializers)."""
    pads = TensorProto(name="Pads_not_on_disk", data_type=TensorProto.INT64, dims=[4])
    pads.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "Pads_not_on_disk.bin"), ("offset", "0"), ("length", "32")):
        entry = pads.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Pad", ["X", "Pads_not_on_disk"], ["Y"], mode="constant")],
        "test-model",
        [
            helper.make_tensor_value_info("X", _FLOAT, [1, 5]),
            helper.make_tensor_value_info("Pads_not_on_disk", TensorProto.INT64, [4]),
        ],
        [helper.make_tensor_value_info("Y", _FLOAT, [2, 6])],
        [pads],
    )
    return _model(graph, opset=13, producer_name="onnx-example")


def _identity_9799() -> onnx.ModelProto:
    """output = Identity(input), float [input_dynamic_axes_1, 16, 7, 5, 3, 3] (onnxruntime issue 9799)."""
    shape: list[str | int | None] = ["input_dynamic_axes_1", 16, 7, 5, 3, 3]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["input"], ["output"], name="Identity_0")],
        "torch-jit-export",
        [helper.make_tensor_value_info("input", _FLOAT, shape)],
        [helper.make_tensor_value_info("output", _FLOAT, shape)],
    )
    return _model(graph, producer_name="pytorch", producer_version="1.10")


def _two_params_lora_model() -> onnx.ModelProto:
    """onnxruntime's lora/two_params_lora_model.py create_model: output = x @ W + (x @ A) @ B, where A [4, 0]
    and B [0, 4] are empty initializers that are also graph inputs (overridable, the LoRA slots)."""
    weight = np.arange(1, 17, dtype=np.float32).reshape(4, 4)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["input_x", "weight_x"], ["mm_output_x"]),
            helper.make_node("MatMul", ["input_x", "lora_param_a"], ["mm_output_a"]),
            helper.make_node("MatMul", ["mm_output_a", "lora_param_b"], ["mm_output_b"]),
            helper.make_node("Add", ["mm_output_x", "mm_output_b"], ["output"]),
        ],
        "two_params_lora_model",
        [
            helper.make_tensor_value_info("input_x", _FLOAT, [4, 4]),
            helper.make_tensor_value_info("lora_param_a", _FLOAT, [4, "dim"]),
            helper.make_tensor_value_info("lora_param_b", _FLOAT, ["dim", 4]),
        ],
        [helper.make_tensor_value_info("output", _FLOAT, [4, 4])],
        [
            numpy_helper.from_array(weight, "weight_x"),
            numpy_helper.from_array(np.zeros([4, 0], dtype=np.float32), "lora_param_a"),
            numpy_helper.from_array(np.zeros([0, 4], dtype=np.float32), "lora_param_b"),
        ],
    )
    return helper.make_model(graph)  # the script's own make_model defaults (opset and IR of onnx's helper)


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mul_1.onnx": _mul_1,
    "matmul_1.onnx": lambda: _matmul(3),
    "matmul_2.onnx": lambda: _matmul("None"),
    "logicaland.onnx": _logicaland,
    "abs_free_dimensions.onnx": _abs_free_dimensions,
    "squeezenet_meta.onnx": _squeezenet_meta,
    "model_with_external_initializer_come_from_user.onnx": _external_initializer_from_user,
    "identity_9799.onnx": _identity_9799,
    "lora/two_params_lora_model.onnx": _two_params_lora_model,
}


def write_all(folder: Path) -> Path:
    """Write every model under `folder` (by its onnxruntime testdata name) and return the folder."""
    for name, build in MODELS.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(build().SerializeToString())
    return folder


if __name__ == "__main__":
    print(write_all(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
