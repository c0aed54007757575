"""The shipped demo model is what its generator script builds, and uses only core ops."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from onyxia.cli.common import builtin_inputs, model_path
from onyxia.cli.data.make_demo_model import build_demo_model, demo_inputs


def test_shipped_model_matches_its_generator() -> None:
    with model_path(None) as path:
        shipped = onnx.load(path)
    built = build_demo_model()
    assert [(n.op_type, list(n.input)) for n in shipped.graph.node] == [
        (n.op_type, list(n.input)) for n in built.graph.node
    ]
    for a, b in zip(shipped.graph.initializer, built.graph.initializer):
        assert a.name == b.name
        np.testing.assert_array_equal(numpy_helper.to_array(a), numpy_helper.to_array(b))


def test_shipped_inputs_match_their_generator() -> None:
    shipped, built = builtin_inputs(), demo_inputs()
    assert sorted(shipped) == sorted(built)
    for name in built:
        np.testing.assert_array_equal(shipped[name], built[name])


def test_demo_uses_only_core_ops() -> None:
    with model_path(None) as path:
        ops = {n.op_type for n in onnx.load(path).graph.node}
    assert ops <= {"Reshape", "MatMul", "Add", "Mul", "Softmax"}
