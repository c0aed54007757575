"""vision/conv_folds.py against onnxruntime: BatchNormalization and bias Adds folded into Conv / ConvTranspose
weights, ConvTranspose with kernel == stride as a pointwise Conv + DepthToSpace, and the declines."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import check_model, compile_model

RNG = np.random.default_rng(23)


def _w(*shape: int, scale: float = 0.3) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _bn(name: str, x: str, y: str, channels: int, inits: dict[str, np.ndarray]) -> onnx.NodeProto:
    inits[f"{name}_s"] = (RNG.random(channels) + 0.5).astype(np.float32)
    inits[f"{name}_b"] = _w(channels)
    inits[f"{name}_m"] = _w(channels)
    inits[f"{name}_v"] = (RNG.random(channels) + 0.1).astype(np.float32)
    params = [f"{name}_{k}" for k in "sbmv"]
    return helper.make_node("BatchNormalization", [x, *params], [y], epsilon=1e-3)


def _model(
    nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], x: tuple[int, ...], outputs: tuple[str, ...] = ("y",)
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    graph = helper.make_graph(
        nodes,
        "folds",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x))],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    return model, {"x": RNG.standard_normal(x).astype(np.float32)}


def _labels(model: onnx.ModelProto) -> list[str]:
    return [s.label for s in compile_model(model).shaders]


def _conv_bn_act(act: str, bias: bool) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    inits = {"w": _w(6, 4, 3, 3), **({"b": _w(6)} if bias else {})}
    nodes = [
        helper.make_node("Conv", ["x", "w", *(["b"] if bias else [])], ["c"], pads=[1, 1, 1, 1]),
        _bn("bn", "c", "n", 6, inits),
        helper.make_node(act, ["n"], ["y"]),
    ]
    return _model(nodes, inits, (1, 4, 9, 11))


@pytest.mark.parametrize("act", ["Relu", "HardSwish"])
@pytest.mark.parametrize("bias", [True, False])
def test_batch_norm_folds_into_conv_and_activation_fuses(act: str, bias: bool) -> None:
    """MobileNetV3 / PP-OCR order: Conv -> BatchNormalization -> activation is one conv kernel."""
    model, feeds = _conv_bn_act(act, bias)
    check_model(model, feeds)
    labels = _labels(model)
    assert len(labels) == 1 and labels[0].startswith("vision/conv"), labels


def test_batch_norm_folds_into_grouped_and_3d_convs() -> None:
    """Depthwise 2-D and rivagan's depth-1 3-D convs: the scale lands on the right output channels."""
    inits = {"dw": _w(8, 1, 3, 3), "w3": _w(5, 8, 1, 3, 3), "b3": _w(5)}
    nodes = [
        helper.make_node("Conv", ["x", "dw"], ["c"], group=8, pads=[1, 1, 1, 1]),
        _bn("bn1", "c", "n", 8, inits),
        helper.make_node("Unsqueeze", ["n", "axis"], ["n3"]),
        helper.make_node("Conv", ["n3", "w3", "b3"], ["c3"], pads=[0, 1, 1, 0, 1, 1]),
        _bn("bn2", "c3", "y", 5, inits),
    ]
    inits["axis"] = np.array([2], np.int64)
    model, feeds = _model(nodes, inits, (1, 8, 7, 6))
    check_model(model, feeds)
    assert not any(label.startswith("normalization/") for label in _labels(model))


def _upsampler(attrs: dict[str, Any], group: int = 1) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """PP-OCRv4 det's head: ConvTranspose -> Add(bias) -> BatchNormalization -> Relu -> ConvTranspose -> Add -> Sigmoid."""
    k = attrs.get("kernel_shape", [2, 2])[0]
    inits = {
        "t1": _w(6, 6 // group, k, k),
        "c1": _w(1, 6, 1, 1),
        "t2": _w(6, 1, 2, 2),
        "t2b": _w(1),
        "c2": _w(1),
    }
    nodes = [
        helper.make_node("ConvTranspose", ["x", "t1"], ["u1"], group=group, **attrs),
        helper.make_node("Add", ["u1", "c1"], ["a1"]),
        _bn("bn", "a1", "n1", 6, inits),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("ConvTranspose", ["r1", "t2", "t2b"], ["u2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Add", ["c2", "u2"], ["a2"]),
        helper.make_node("Sigmoid", ["a2"], ["y"]),
    ]
    return _model(nodes, inits, (2, 6, 5, 7))


def test_upsampling_conv_transpose_runs_as_pointwise_conv() -> None:
    """k == s ConvTransposes: the bias Add and BatchNormalization fold, the Relu and Sigmoid move in front of
    the DepthToSpace into the pointwise kernel's epilogue; nothing runs the direct kernel."""
    model, feeds = _upsampler({"kernel_shape": [2, 2], "strides": [2, 2]})
    check_model(model, feeds)
    labels = _labels(model)
    assert all("@direct" not in label for label in labels), labels
    assert sorted(label.split("@")[0] for label in labels) == ["rearrange/indexmap"] * 2 + ["vision/conv_gemm"] * 2


@pytest.mark.parametrize(
    ("attrs", "group"),
    [
        ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, 1),
        ({"kernel_shape": [2, 2], "strides": [2, 2]}, 2),
        ({"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1]}, 1),
    ],
    ids=["overlapping", "grouped", "padded"],
)
def test_other_conv_transposes_fold_but_stay_direct(attrs: dict[str, Any], group: int) -> None:
    """Not k == s (or grouped, padded): still correct, the first ConvTranspose keeps the direct kernel."""
    model, feeds = _upsampler(attrs, group)
    check_model(model, feeds)
    labels = _labels(model)
    assert "vision/conv@direct" in labels and not any(label.startswith("normalization/") for label in labels)


def test_conv_output_read_elsewhere_keeps_its_batch_norm() -> None:
    inits = {"w": _w(3, 3, 3, 3)}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        _bn("bn", "c", "y", 3, inits),
        helper.make_node("Relu", ["c"], ["z"]),
    ]
    model, feeds = _model(nodes, inits, (1, 3, 6, 6), ("y", "z"))
    check_model(model, feeds)
    assert "normalization/batch_norm" in _labels(model)


def test_add_of_a_full_tensor_is_a_residual_not_a_bias() -> None:
    """A constant that varies along H is no per-channel bias: it stays a broadcast Add."""
    inits = {"w": _w(4, 2, 1, 1), "r": _w(1, 4, 5, 1)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "r"], ["y"])]
    model, feeds = _model(nodes, inits, (1, 2, 5, 3))
    check_model(model, feeds)
