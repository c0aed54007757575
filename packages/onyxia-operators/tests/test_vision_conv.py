"""Conv and ConvTranspose against onnxruntime: padding modes, strides, dilations, groups, bias, 1-D to 3-D."""

from typing import Any

import numpy as np
import pytest
from oracle import assert_close, check_op, compile_model, make_model, reference_outputs, runtime

from onyxia.core import ShapeInferenceError, UnsupportedOpError

RNG = np.random.default_rng(0)


def _r(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


# (x shape, w shape, with bias, attributes)
CONV_CASES: list[tuple[tuple[int, ...], tuple[int, ...], bool, dict[str, Any]]] = [
    ((1, 3, 7, 8), (4, 3, 3, 3), True, {"pads": [1, 1, 1, 1]}),
    ((2, 4, 9, 9), (6, 2, 3, 2), False, {"group": 2, "strides": [2, 1], "dilations": [1, 2], "pads": [0, 1, 2, 1]}),
    ((1, 4, 6, 7), (4, 1, 3, 3), True, {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 4, 6, 6), (8, 1, 2, 2), False, {"group": 4, "auto_pad": "SAME_LOWER"}),
    ((1, 4, 6, 7), (4, 4, 2, 3), False, {"auto_pad": "VALID", "strides": [2, 2]}),
    ((2, 3, 10), (5, 3, 3), True, {"strides": [2], "pads": [1, 2]}),
    ((1, 2, 12), (2, 1, 3), False, {"group": 2, "dilations": [3], "pads": [3, 2]}),
    ((1, 2, 5, 6, 4), (3, 2, 3, 2, 3), True, {"strides": [2, 1, 1], "pads": [1, 0, 1, 1, 1, 0]}),
    ((1, 4, 4, 5, 5), (4, 2, 2, 3, 2), False, {"group": 2, "dilations": [2, 1, 2], "pads": [1, 0, 1, 1, 2, 0]}),
]

TRANSPOSE_CASES: list[tuple[tuple[int, ...], tuple[int, ...], bool, dict[str, Any]]] = [
    ((1, 3, 4, 5), (3, 2, 3, 3), True, {"strides": [2, 2], "pads": [1, 1, 0, 1], "output_padding": [1, 0]}),
    ((1, 4, 4, 4), (4, 1, 3, 3), False, {"group": 4, "strides": [2, 1], "dilations": [2, 1]}),
    ((1, 4, 3, 4), (4, 2, 3, 2), True, {"group": 2, "strides": [1, 2]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), False, {"strides": [2, 2], "output_shape": [9, 10]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), True, {"strides": [2, 2], "output_shape": [8, 7]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), True, {"strides": [2, 2], "output_shape": [10, 7], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 4, 4), (2, 3, 3, 3), False, {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 4, 3), (2, 3, 4, 4), False, {"strides": [3, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 3, 3), (2, 3, 3, 3), False, {"strides": [2, 2], "auto_pad": "VALID"}),
    ((2, 2, 5), (2, 3, 3), True, {"strides": [2]}),
    ((1, 2, 3, 4, 3), (2, 3, 3, 2, 3), True, {"strides": [2, 1, 2], "pads": [1, 0, 0, 0, 1, 1]}),
    (
        (1, 4, 2, 3, 3),
        (4, 1, 2, 3, 2),
        False,
        {"group": 2, "dilations": [1, 2, 1], "output_padding": [0, 0, 1], "strides": [1, 1, 2]},
    ),
]


def _inputs(x: tuple[int, ...], w: tuple[int, ...], bias: bool, channels: int, dtype: type) -> dict:
    return {"x": _r(*x, dtype=dtype), "w": _r(*w, dtype=dtype), "b": _r(channels, dtype=dtype) if bias else None}


@pytest.mark.parametrize(("x", "w", "bias", "attrs"), CONV_CASES)
def test_conv(x: tuple[int, ...], w: tuple[int, ...], bias: bool, attrs: dict[str, Any]) -> None:
    check_op("Conv", _inputs(x, w, bias, w[0], np.float32), attrs, initializers=["w", "b"])


@pytest.mark.parametrize(("x", "w", "bias", "attrs"), TRANSPOSE_CASES)
def test_conv_transpose(x: tuple[int, ...], w: tuple[int, ...], bias: bool, attrs: dict[str, Any]) -> None:
    channels = w[1] * attrs.get("group", 1)
    check_op("ConvTranspose", _inputs(x, w, bias, channels, np.float32), attrs, initializers=["w", "b"])


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_f16(op: str) -> None:
    inputs = _inputs((1, 4, 5, 6), (4, 2, 3, 3), True, 4, np.float16)
    inputs["x"] = inputs["x"] * np.float16(0.5)
    check_op(op, inputs, {"group": 2, "pads": [1, 0, 1, 1]}, initializers=["w", "b"], tolerance=(2e-2, 2e-2))


def test_weights_as_graph_inputs() -> None:
    check_op("Conv", {"x": _r(1, 2, 5, 5), "w": _r(3, 2, 2, 2)}, {"strides": [2, 2]})


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_symbolic_batch_rebinds_without_recompiling(op: str) -> None:
    inputs = _inputs((1, 2, 5, 6), (2, 2, 3, 3), True, 2, np.float32)
    attrs = {"strides": [2, 1], "pads": [1, 1, 0, 1]}
    model = make_model(op, inputs, attrs, initializers=["w", "b"], dim_params={"x": ["N", 2, 5, 6]})
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for batch in (3, 1):
        feeds = {"x": _r(batch, 2, 5, 6)}
        assert_close(executor.run(feeds)["y0"], reference_outputs(model, feeds, "ort")[0])
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines


def _compile(op: str, inputs: dict, attrs: dict) -> None:
    model = make_model(op, inputs, attrs, initializers=["w"])
    model.graph.node[0].name = "conv_3"
    compile_model(model)


def test_four_spatial_axes_are_refused_naming_kernel_shape() -> None:
    with pytest.raises(UnsupportedOpError, match=r"node 'conv_3' \(Conv, domain ai.onnx\): attribute kernel_shape="):
        _compile("Conv", {"x": _r(1, 1, 3, 3, 3, 3), "w": _r(1, 1, 2, 2, 2, 2)}, {})


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_unknown_auto_pad_is_refused(op: str) -> None:
    with pytest.raises(UnsupportedOpError, match=rf"node 'conv_3' \({op}, domain ai.onnx\): attribute auto_pad=SAME"):
        _compile(op, {"x": _r(1, 2, 4, 4), "w": _r(2, 2, 2, 2)}, {"auto_pad": "SAME"})


def test_channel_mismatch_names_group() -> None:
    with pytest.raises(ShapeInferenceError, match=r"node 'conv_3' \(Conv.*3 channels.*group=2"):
        _compile("Conv", {"x": _r(1, 3, 4, 4), "w": _r(2, 1, 2, 2)}, {"group": 2})
