"""NodeArg names, shapes and types, and free-dimension overrides, against onnxruntime's on the same files."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from ort_models import make_model, value

import onyxia.ort as ort


def _dims_model() -> onnx.ModelProto:
    """Inputs with named dims, unnamed ones (no value, no name: the loader's unk__ dims), '?' and '-1'
    names, a negative value, a blank name and an expression; outputs declared partly or not at all;
    several element types; an overridable initializer."""
    x = value("x", TensorProto.FLOAT, ["batch", None, "?", "-1", 3, "seq + 1"])
    negative = value("neg", TensorProto.INT64, [2, 3])
    negative.type.tensor_type.shape.dim[0].dim_value = -1
    blank = value("blank", TensorProto.FLOAT16, [" ", 2])
    flags = value("flags", TensorProto.BOOL, [4])
    scalar = value("scalar", TensorProto.INT32, [])
    weight = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
    nodes = [
        helper.make_node("Add", ["x", "x"], ["x2"]),
        helper.make_node("Transpose", ["x2"], ["xt"], perm=[5, 4, 3, 2, 1, 0]),
        helper.make_node("Identity", ["neg"], ["neg_out"]),
        helper.make_node("Identity", ["blank"], ["blank_out"]),
        helper.make_node("Not", ["flags"], ["flags_out"]),
        helper.make_node("Add", ["scalar", "scalar"], ["scalar_out"]),
        helper.make_node("Add", ["w", "w"], ["w2"]),
    ]
    inputs = [x, negative, blank, flags, scalar, value("w", TensorProto.FLOAT, [2, 2])]
    outputs = [
        value("x2", TensorProto.FLOAT, ["m", None, None, None, None, None]),  # a declared name wins over 'batch'
        value("xt", TensorProto.FLOAT, None),  # no shape: onnxruntime infers it
        value("neg_out", TensorProto.INT64, [None, 3]),
        value("blank_out", TensorProto.FLOAT16, None),
        value("flags_out", TensorProto.BOOL, [4]),
        value("scalar_out", TensorProto.INT32, None),
        value("w2", TensorProto.FLOAT, [2, 2]),
    ]
    return make_model(nodes, inputs, outputs, [weight])


def _args(args: list) -> list[tuple[str, str, list]]:
    return [(a.name, a.type, a.shape) for a in args]


@pytest.mark.parametrize("overrides", [{}, {"batch": 2, "?": 5}], ids=["open", "overridden"])
def test_node_args_match_onnxruntime(tmp_path: Path, overrides: dict[str, int]) -> None:
    path = tmp_path / "dims.onnx"
    onnx.save(_dims_model(), path)
    theirs_options, ours_options = onnxruntime.SessionOptions(), ort.SessionOptions()
    for name, size in overrides.items():
        theirs_options.add_free_dimension_override_by_name(name, size)
        ours_options.add_free_dimension_override_by_name(name, size)
    theirs_options.log_severity_level = 3  # the overridable initializer's warning
    theirs = onnxruntime.InferenceSession(str(path), theirs_options, providers=["CPUExecutionProvider"])
    ours = ort.InferenceSession(path, ours_options)
    assert _args(ours.get_inputs()) == _args(theirs.get_inputs())
    assert _args(ours.get_outputs()) == _args(theirs.get_outputs())
    assert _args(ours.get_overridable_initializers()) == _args(theirs.get_overridable_initializers())
    assert str(ours.get_inputs()[0]) == str(theirs.get_inputs()[0])


def test_free_dimension_overrides_fix_dims(tmp_path: Path) -> None:
    """Overrides by name and by denotation show in get_inputs() and bind the feeds, as in onnxruntime."""
    x = value("x", TensorProto.FLOAT, ["n", None, 4])
    x.type.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    path = tmp_path / "over.onnx"
    onnx.save(
        make_model([helper.make_node("Add", ["x", "x"], ["y"])], [x], [value("y", TensorProto.FLOAT, None)]), path
    )
    sessions = []
    for module in (onnxruntime, ort):
        options = module.SessionOptions()
        options.add_free_dimension_override_by_name("n", 2)
        options.add_free_dimension_override_by_denotation("DATA_CHANNEL", 3)
        options.intra_op_num_threads = 2  # accepted, no effect on Onyxia
        options.graph_optimization_level = module.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        kwargs = {"providers": ["CPUExecutionProvider"]} if module is onnxruntime else {}
        sessions.append(module.InferenceSession(str(path), options, **kwargs))
    theirs, ours = sessions
    assert _args(ours.get_inputs()) == _args(theirs.get_inputs()) == [("x", "tensor(float)", [2, 3, 4])]
    assert _args(ours.get_outputs()) == _args(theirs.get_outputs())
    assert ours.get_session_options().intra_op_num_threads == 2
    good = np.ones((2, 3, 4), np.float32)
    np.testing.assert_array_equal(ours.run(None, {"x": good})[0], theirs.run(None, {"x": good})[0])
    bad = np.ones((5, 3, 4), np.float32)
    errors = []
    for session in (theirs, ours):
        with pytest.raises(Exception) as caught:
            session.run(None, {"x": bad})
        errors.append(caught.value)
    assert type(errors[1]).__name__ == type(errors[0]).__name__ == "InvalidArgument"
    assert str(errors[1]).split("\n")[:3] == str(errors[0]).split("\n")[:3]


def test_provider_fallback_warns_in_onnxruntimes_words(add_mul: Path) -> None:
    asked = ["CUDAExecutionProvider", ("TensorrtExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"]
    texts = []
    for module in (onnxruntime, ort):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session = module.InferenceSession(str(add_mul), providers=asked)
        texts.append(
            [str(w.message).split("Available providers:")[0] for w in caught if "Specified provider" in str(w.message)]
        )
        assert len(session.run(None, {"x": np.ones((1, 3), np.float32)})) == 2
    theirs, ours = texts
    # onnxruntime (a CPU build) lacks CUDA and TensorRT: the same words for those; Onyxia has no CPU
    # provider either, so it warns for that one too, in the same words
    assert theirs == ours[:2]
    assert ours[2] == theirs[0].replace("CUDAExecutionProvider", "CPUExecutionProvider")
    assert ort.get_available_providers() == ["OnyxiaWebGPUExecutionProvider"]
    session = ort.InferenceSession(str(add_mul), providers=[ort.PROVIDER])
    assert session.get_providers() == [ort.PROVIDER]
    assert session.get_provider_options() == {ort.PROVIDER: {}}


def test_malformed_provider_list_falls_back_not_fails(add_mul: Path) -> None:
    with pytest.warns(UserWarning, match="EP Error 'providers' values must be either strings"):
        session = ort.InferenceSession(str(add_mul), providers=[42])
    assert session.get_providers() == [ort.PROVIDER]
