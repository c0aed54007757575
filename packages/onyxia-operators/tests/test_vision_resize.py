"""Resize on NCHW against onnxruntime: every mode under every coordinate map, nearest rounding, sizes and axes,
cubic's coefficient and exclude_outside, antialiased downsampling, and tf_crop_and_resize."""

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper
from oracle import (
    assert_close,
    check_model,
    check_op,
    check_rebinding,
    compile_model,
    make_model,
    reference_outputs,
    runtime,
)

from onyxia.core import ShapeInferenceError, UnsupportedOpError
from onyxia.onnx.errors import ModelValidationError

RNG = np.random.default_rng(0)
TRANSFORMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"]


def _r(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _scales(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def _sizes(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_scales_under_every_coordinate_map(mode: str, transform: str) -> None:
    attrs = {"mode": mode, "coordinate_transformation_mode": transform}
    for scales in (_scales(1, 1, 2, 3), _scales(1, 1, 1.7, 0.4)):
        check_op(
            "Resize", {"x": _r(2, 3, 5, 6), "roi": None, "scales": scales}, attrs, initializers=["scales"], opset=19
        )


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize(("a", "exclude_outside"), [(-0.75, 0), (-0.5, 1)])
def test_cubic_under_every_coordinate_map(transform: str, a: float, exclude_outside: int) -> None:
    attrs = {"mode": "cubic", "coordinate_transformation_mode": transform, "cubic_coeff_a": a}
    attrs["exclude_outside"] = exclude_outside
    for scales in (_scales(1, 1, 2, 3), _scales(1, 1, 1.7, 0.4)):
        check_op(
            "Resize", {"x": _r(2, 3, 5, 6), "roi": None, "scales": scales}, attrs, initializers=["scales"], opset=19
        )


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize(
    ("scales", "sizes"), [(_scales(1, 1, 0.6, 0.35), None), (None, _sizes(1, 2, 5, 4)), (_scales(1, 1, 2, 0.5), None)]
)
def test_antialiased_downsampling(mode: str, scales: np.ndarray | None, sizes: np.ndarray | None) -> None:
    # the kernel widens by 1 / scale on a downsampling axis; an upsampling axis (2 here) is unchanged
    inputs = {"x": _r(1, 2, 9, 12), "roi": None, "scales": scales, "sizes": sizes}
    attrs = {"mode": mode, "antialias": 1}
    check_op("Resize", inputs, attrs, initializers=["scales", "sizes"], opset=19)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize(
    ("roi", "attrs"),
    [
        (np.array([0, 0, 0.2, 0.3, 1, 1, 0.9, 0.75], np.float32), {}),
        (np.array([0, 0, -0.3, 0.5, 1, 1, 0.8, 1.4], np.float32), {"extrapolation_value": 10.0}),  # extrapolates
        (np.array([0.6, 0.1, 0.9, 0.7], np.float32), {"axes": [3, 2]}),
    ],
)
def test_tf_crop_and_resize(mode: str, roi: np.ndarray, attrs: dict[str, Any]) -> None:
    sizes = _sizes(6, 5) if "axes" in attrs else _sizes(2, 3, 6, 5)
    inputs = {"x": _r(2, 3, 7, 8), "roi": roi, "scales": None, "sizes": sizes}
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", **attrs}
    check_op("Resize", inputs, attrs, initializers=["roi", "sizes"], opset=19)


def test_crop_needs_a_constant_roi() -> None:
    inputs = {"x": _r(1, 2, 4, 4), "roi": None, "scales": _scales(1, 1, 2, 2)}
    with pytest.raises(ShapeInferenceError, match=r"node 'up_2' \(Resize.*tf_crop_and_resize needs input 1 \(roi\)"):
        _compile(inputs, {"coordinate_transformation_mode": "tf_crop_and_resize"})


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_nearest_rounding_on_sizes(nearest_mode: str) -> None:
    for transform, sizes in (("asymmetric", _sizes(1, 2, 7, 3)), ("half_pixel", _sizes(1, 2, 8, 3))):
        attrs = {"mode": "nearest", "nearest_mode": nearest_mode, "coordinate_transformation_mode": transform}
        inputs = {"x": _r(1, 2, 4, 6), "roi": None, "scales": None, "sizes": sizes}
        check_op("Resize", inputs, attrs, initializers=["sizes"], opset=13)


@pytest.mark.parametrize(
    ("sizes", "attrs"),
    [
        (_sizes(7, 4), {"axes": [2, 3]}),
        (_sizes(7, 4), {"axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}),
        (_sizes(4, 7), {"axes": [3, 2], "keep_aspect_ratio_policy": "not_smaller"}),
    ],
)
def test_sizes_on_axes_with_aspect_policy(sizes: np.ndarray, attrs: dict[str, Any]) -> None:
    inputs = {"x": _r(1, 2, 4, 6), "roi": None, "scales": None, "sizes": sizes}
    check_op("Resize", inputs, {"mode": "linear", **attrs}, initializers=["sizes"], opset=19)


def test_opset_11_with_an_empty_roi() -> None:
    inputs = {"x": _r(1, 2, 4, 6), "roi": np.zeros(0, np.float32), "scales": _scales(1, 1, 2, 2)}
    check_op("Resize", inputs, {"mode": "linear"}, initializers=["roi", "scales"], opset=11)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_f16(mode: str) -> None:
    inputs = {"x": _r(1, 2, 4, 6, dtype=np.float16), "roi": None, "scales": _scales(1, 1, 2, 1.5)}
    check_op("Resize", inputs, {"mode": mode}, initializers=["scales"], opset=13)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_symbolic_batch_rebinds_without_recompiling(mode: str) -> None:
    inputs = {"x": _r(1, 3, 4, 5), "roi": None, "scales": _scales(1, 1, 2, 2)}
    model = make_model("Resize", inputs, {"mode": mode}, opset=13, initializers=["scales"])
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for batch in (2, 1):
        feeds = {"x": _r(batch, 3, 4, 5)}
        assert_close(executor.run(feeds)["y0"], reference_outputs(model, feeds, "ort")[0])
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines


@pytest.mark.parametrize(("scale", "sides"), [(2.0, ((4, 5), (3, 7))), (0.5, ((6, 8), (5, 9)))])
def test_symbolic_spatial_dims_under_exact_scales(scale: float, sides: tuple[tuple[int, int], ...]) -> None:
    """PP-OCR's FPN upsamples feature maps whose H and W are symbolic by 2, 4 and 8: an integer scale (or one over
    a power of two) keeps the output size symbolic (``H * 2``), so one plan serves every image size."""
    inputs = {"x": _r(1, 2, *sides[0]), "roi": None, "scales": _scales(1, 1, scale, scale)}
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    model = make_model("Resize", inputs, attrs, opset=13, initializers=["scales"])
    for axis, name in ((2, "H"), (3, "W")):
        model.graph.input[0].type.tensor_type.shape.dim[axis].dim_param = name
    check_rebinding(model, [{"x": _r(1, 2, h, w)} for h, w in sides])


def test_symbolic_spatial_dims_under_other_scales_name_the_axis() -> None:
    inputs = {"x": _r(1, 2, 4, 5), "roi": None, "scales": _scales(1, 1, 1.5, 1.5)}
    model = make_model("Resize", inputs, {"mode": "nearest"}, opset=13, initializers=["scales"])
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "H"
    with pytest.raises(ShapeInferenceError, match="symbolic size H and scale 1.5"):
        compile_model(model)


def test_sizes_built_from_the_symbolic_input_shape() -> None:
    """PyTorch's interpolate(size=...) exports sizes as Concat(Shape(x)[:2], [h, w])."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], end=2),
        helper.make_node("Concat", ["shape", "hw"], ["sizes"], axis=0),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["y0"], mode="linear"),
    ]
    x_info = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", "C", 4, 5])
    hw = onnx.numpy_helper.from_array(_sizes(7, 3), "hw")
    graph = helper.make_graph(nodes, "resize_sizes", [x_info], [helper.make_empty_tensor_value_info("y0")], [hw])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)
    check_model(model, {"x": _r(2, 3, 4, 5)})


def _compile(inputs: dict, attrs: dict, initializers: tuple[str, ...] = ("scales",)) -> None:
    model = make_model("Resize", inputs, attrs, opset=19, initializers=initializers)
    model.graph.node[0].name = "up_2"
    compile_model(model)


@pytest.mark.parametrize(
    ("attrs", "attribute"),
    [
        ({"mode": "area"}, "mode=area"),
        (
            {"coordinate_transformation_mode": "tf_half_pixel_for_nn"},
            "coordinate_transformation_mode=tf_half_pixel_for_nn",
        ),
        ({"nearest_mode": "round"}, "nearest_mode=round"),
    ],
)
def test_unsupported_attribute_values_name_node_op_and_attribute(attrs: dict, attribute: str) -> None:
    inputs = {"x": _r(1, 2, 4, 4), "roi": None, "scales": _scales(1, 1, 2, 2)}
    with pytest.raises(UnsupportedOpError, match=rf"node 'up_2' \(Resize, domain ai.onnx\): attribute {attribute} "):
        _compile(inputs, attrs)


def test_unsupported_aspect_policy_names_the_attribute() -> None:
    inputs = {"x": _r(1, 2, 4, 4), "roi": None, "scales": None, "sizes": _sizes(1, 2, 8, 8)}
    with pytest.raises(ModelValidationError, match=r"Resize, node name: up_2.*keep_aspect_ratio_policy.: fit"):
        _compile(inputs, {"keep_aspect_ratio_policy": "fit"}, ("sizes",))


def test_resizing_channels_is_refused() -> None:
    inputs = {"x": _r(1, 2, 4, 4), "roi": None, "scales": _scales(1, 2, 2, 2)}
    with pytest.raises(UnsupportedOpError, match=r"node 'up_2' \(Resize.*resize axis 1 \(scale 2.0"):
        _compile(inputs, {})


def test_scales_known_only_at_run_time_get_a_plan_per_value() -> None:
    """Scales from a graph input shape the kernel: the plan is compiled for each value on first use
    (`compiler.deferred`) and cached, so a value seen before compiles nothing."""
    inputs = {"x": _r(1, 2, 4, 4), "roi": None, "scales": _scales(1, 1, 2, 2)}
    model = make_model("Resize", inputs, {"mode": "linear"}, opset=19)
    executor = runtime().load_model(compile_model(model))
    for run, scales in enumerate([(1, 1, 2, 2), (1, 1, 0.5, 1.5), (1, 1, 2, 2)], 1):
        feeds = {"x": inputs["x"], "scales": _scales(*scales)}
        assert_close(executor.run(feeds)["y0"], reference_outputs(model, feeds, "ort")[0])
        assert executor.stats.replans == min(run, 2), "one plan per distinct value, the third run reuses the first"
