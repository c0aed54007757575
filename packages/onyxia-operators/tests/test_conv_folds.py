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
    nodes: list[onnx.NodeProto],
    inits: dict[str, np.ndarray],
    x: tuple[int, ...],
    outputs: tuple[str, ...] = ("y",),
    opset: int = 17,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    graph = helper.make_graph(
        nodes,
        "folds",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x))],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
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


def _upsampler(attrs: dict[str, Any], group: int = 1, opset: int = 17) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
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
    return _model(nodes, inits, (2, 6, 5, 7), opset=opset)


@pytest.mark.parametrize("opset", [17, 10])
def test_upsampling_conv_transpose_runs_as_pointwise_conv(opset: int) -> None:
    """k == s ConvTransposes: the bias Add and BatchNormalization fold, the Relu and Sigmoid move in front of
    the DepthToSpace into the pointwise kernel's epilogue; nothing runs the direct kernel. Opset 10 has no
    DepthToSpace mode attribute: the lowering's DCR order is the default there too."""
    model, feeds = _upsampler({"kernel_shape": [2, 2], "strides": [2, 2]}, opset=opset)
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


def _c(name: str, value: np.ndarray | float, inits: dict[str, np.ndarray]) -> str:
    inits[name] = np.asarray(value, np.float32)
    return name


def _lcnet_block(
    pads: list[int], gate: tuple[float, float, float, float]
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """PP-LCNetV3 as paddle2onnx writes it: depthwise conv -> affine block -> x * Clip(x + 3, 0, 6) / 6 ->
    affine block -> 1 x 1 conv (pads `pads`) -> per-channel Mul, Sub, Div."""
    three, lo, hi, six = gate
    i: dict[str, np.ndarray] = {"dw": _w(6, 1, 3, 3), "dwb": _w(6), "pw": _w(8, 6, 1, 1), "pwb": _w(8)}
    nodes = [
        helper.make_node("Conv", ["x", "dw", "dwb"], ["c1"], group=6, pads=[1, 1, 1, 1]),
        helper.make_node("Mul", [_c("s1", 1.3, i), "c1"], ["m1"]),
        helper.make_node("Add", ["m1", _c("t1", 0.2, i)], ["a1"]),
        helper.make_node("Add", ["a1", _c("three", three, i)], ["p3"]),
        helper.make_node("Clip", ["p3", _c("lo", lo, i), _c("hi", hi, i)], ["cl"]),
        helper.make_node("Mul", ["a1", "cl"], ["g"]),
        helper.make_node("Div", ["g", _c("six", six, i)], ["hs"]),
        helper.make_node("Mul", ["hs", _c("s2", 0.7, i)], ["m2"]),
        helper.make_node("Add", [_c("t2", -0.4, i), "m2"], ["a2"]),
        helper.make_node("Conv", ["a2", "pw", "pwb"], ["c2"], pads=pads),
        helper.make_node("Mul", ["c2", _c("s3", RNG.random((1, 8, 1, 1)) + 0.5, i)], ["m3"]),
        helper.make_node("Sub", ["m3", _c("t3", _w(8, 1, 1), i)], ["d3"]),
        helper.make_node("Div", ["d3", _c("k3", 2.0, i)], ["y"]),
    ]
    return _model(nodes, i, (1, 6, 9, 8))


def test_lcnet_block_is_two_conv_kernels() -> None:
    """Affine blocks fold into the convs on either side (the 1 x 1 conv reads no padding), the spelled-out
    HardSwish becomes the depthwise conv's epilogue, the trailing Mul / Sub / Div fold into the 1 x 1 conv."""
    model, feeds = _lcnet_block([0, 0, 0, 0], (3.0, 0.0, 6.0, 6.0))
    check_model(model, feeds)
    labels = _labels(model)
    assert len(labels) == 2 and all(label.startswith("vision/conv") for label in labels), labels


@pytest.mark.parametrize(
    ("pads", "gate"),
    [([1, 1, 1, 1], (3.0, 0.0, 6.0, 6.0)), ([0, 0, 0, 0], (3.0, 0.0, 5.0, 6.0))],
    ids=["padded_conv_keeps_the_affine", "not_hardswish"],
)
def test_lcnet_block_variants_that_keep_elementwise_passes(pads: list[int], gate: tuple[float, ...]) -> None:
    """A padded conv would read t where it reads zeros; a Clip to 5 is no HardSwish: both stay correct and
    keep an elementwise pass (the per-channel ops after the last conv still fold)."""
    model, feeds = _lcnet_block(pads, gate)  # type: ignore[arg-type]
    check_model(model, feeds)
    labels = _labels(model)
    assert any(label.startswith("elementwise/") for label in labels), labels


def test_per_channel_input_affine_into_grouped_pointwise_conv() -> None:
    inits = {"w": _w(6, 2, 1, 1), "b": _w(6), "s": _w(1, 4, 1, 1) + 1.0, "t": _w(4, 1, 1)}
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Mul", ["r", "s"], ["m"]),
        helper.make_node("Add", ["t", "m"], ["a"]),
        helper.make_node("Conv", ["a", "w", "b"], ["y"], group=2),
    ]
    model, feeds = _model(nodes, inits, (2, 4, 5, 7))
    check_model(model, feeds)
    assert sorted(label.split("/")[0] for label in _labels(model)) == ["elementwise", "vision"]


@pytest.mark.parametrize(
    ("attrs", "tail"),
    [
        ({"pads": [2, 0, 2, 0], "strides": [2, 1]}, "Relu"),
        ({"dilations": [2, 1], "pads": [3, 0, 5, 0]}, "residual"),
        ({}, "Slice"),
    ],
    ids=["padded_strided_relu", "dilated_residual", "magika"],
)
def test_column_conv_runs_as_a_row(attrs: dict[str, Any], tail: str) -> None:
    """magika's [N, C, L, 1] conv with a [5, 1] kernel runs on the [N, C, 1, L] view of the same bytes."""
    inits = {"w": _w(6, 6, 5, 1), "b": _w(6), "starts": np.array([1], np.int64), "ends": np.array([9], np.int64)}
    tails = {
        "Relu": [helper.make_node("Relu", ["c"], ["y"])],
        "residual": [helper.make_node("Add", ["x", "c"], ["y"])],
        "Slice": [helper.make_node("Slice", ["c", "starts", "ends", "starts"], ["y"])],
    }
    model, feeds = _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs), *tails[tail]], inits, (2, 6, 20, 1)
    )
    check_model(model, feeds)
    plan = compile_model(model)
    convs = [s for s in plan.shaders if s.label.startswith("vision/conv")]
    assert len(convs) == 1 and "#{" not in convs[0].source
    if tail != "Slice":
        assert len(plan.shaders) == 1, [s.label for s in plan.shaders]


def test_column_conv_with_width_padding_stays() -> None:
    inits = {"w": _w(4, 3, 3, 1)}
    model, feeds = _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], inits, (1, 3, 9, 1))
    check_model(model, feeds)


@pytest.mark.parametrize("opset", [17, 12])
@pytest.mark.parametrize("tail", ["tanh_bn", "residual"])
def test_depth_1_volume_conv_runs_as_2d(opset: int, tail: str) -> None:
    """rivagan's [N, C, 1, H, W] convs with [1, k, k] kernels run as 2-D convs of the plane (Squeeze and
    Unsqueeze spelled for the opset: axes an attribute before 13)."""
    inits = {"w": _w(4, 4, 1, 5, 5, scale=0.1), "b": _w(4)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[0, 2, 2, 0, 2, 2])]
    if tail == "residual":
        nodes.append(helper.make_node("Add", ["c", "x"], ["y"]))
    else:
        nodes += [helper.make_node("Tanh", ["c"], ["t"]), _bn("bn", "t", "y", 4, inits)]
    model, feeds = _model(nodes, inits, (2, 4, 1, 9, 11), opset=opset)
    check_model(model, feeds)
    plan = compile_model(model)
    assert any(s.label.startswith("vision/conv_gemm") and "#{KD}" not in s.source for s in plan.shaders)
    if tail == "residual":
        assert [s.label.split("@")[0] for s in plan.shaders] == ["vision/conv_gemm"]
