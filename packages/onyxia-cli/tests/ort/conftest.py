"""Fixtures for the onyxia.ort tests: tiny models built with onnx.helper (few distinct shaders: Add, Mul,
Concat, ReduceSum, one Conv; builders in `ort_models`), and the two modules every parity test runs:
onnxruntime and onyxia.ort."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

# nox runs pytest in importlib mode: make `ort_models` beside this file importable by the tests
sys.path.append(str(Path(__file__).parent))  # appended: `conftest` by name stays the top tests/conftest.py

from ort_models import make_model, save, value


@pytest.fixture
def add_mul(tmp_path: Path) -> Path:
    """x[n, 3] -> y = x + x, z = x * x (two outputs, one named dim)."""
    model = make_model(
        [helper.make_node("Add", ["x", "x"], ["y"]), helper.make_node("Mul", ["x", "x"], ["z"])],
        [value("x", TensorProto.FLOAT, ["n", 3])],
        [value("y", TensorProto.FLOAT, ["n", 3]), value("z", TensorProto.FLOAT, ["n", 3])],
    )
    model.producer_name = "onyxia-tests"
    model.doc_string = "adds and squares"
    model.domain = "org.onyxia.tests"
    model.model_version = 7
    model.graph.doc_string = "the graph"
    helper.set_model_props(model, {"labels": "cat,dog", "producer_name": "a prop of that name"})
    return save(model, tmp_path / "add_mul.onnx")


@pytest.fixture
def kv_step(tmp_path: Path) -> Path:
    """One decode step: present = Concat(past, x) along 'p'; total = ReduceSum(present, axis 1)."""
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    model = make_model(
        [
            helper.make_node("Concat", ["past", "x"], ["present"], axis=1),
            helper.make_node("ReduceSum", ["present", "axes"], ["total"], keepdims=1),
        ],
        [value("past", TensorProto.FLOAT, [1, "p", 4]), value("x", TensorProto.FLOAT, [1, 1, 4])],
        [value("present", TensorProto.FLOAT, [1, "p + 1", 4]), value("total", TensorProto.FLOAT, [1, 1, 4])],
        [axes],
    )
    return save(model, tmp_path / "kv_step.onnx")


@pytest.fixture
def same_conv(tmp_path: Path) -> Path:
    """Conv, auto_pad=SAME_UPPER and stride 2, over [1, 1, h, w]: its pads need h and w as numbers."""
    weight = numpy_helper.from_array(np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3) / 9, "w")
    model = make_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2], kernel_shape=[3, 3])],
        [value("x", TensorProto.FLOAT, [1, 1, "h", "w"])],
        [value("y", TensorProto.FLOAT, None)],
        [weight],
    )
    return save(model, tmp_path / "same_conv.onnx")


@pytest.fixture
def scalar_scale(tmp_path: Path) -> Path:
    """y = x * s with a 0-d input s; s_out = s + s (a 0-d output)."""
    model = make_model(
        [helper.make_node("Mul", ["x", "s"], ["y"]), helper.make_node("Add", ["s", "s"], ["s_out"])],
        [value("x", TensorProto.FLOAT, ["n"]), value("s", TensorProto.FLOAT, [])],
        [value("y", TensorProto.FLOAT, ["n"]), value("s_out", TensorProto.FLOAT, [])],
    )
    return save(model, tmp_path / "scalar_scale.onnx")


@pytest.fixture
def ort_reference():
    import onnxruntime

    return onnxruntime
