"""Resize of rank-3 ([N, C, L]: 1-D upsampling in audio and TTS decoders) and rank-5 ([N, C, D, H, W])
inputs against onnxruntime, on the rank-4 kernel: nearest under its rounding and coordinate maps, linear
(trilinear at rank 5), antialiased and tf_crop_and_resize taps, scales, sizes and the axes attribute.
onnxruntime has no cubic kernel at these ranks; Onyxia's follows the ONNX reference there."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from oracle import check_op, compile_model, make_model

from onyxia.core import UnsupportedOpError

RNG = np.random.default_rng(3)
X3 = RNG.standard_normal((2, 3, 7)).astype(np.float32)
X5 = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)


def _resize(x: np.ndarray, attrs: dict[str, Any], *, scales: Any = None, sizes: Any = None, roi: Any = None) -> dict:
    return {
        "x": x,
        "roi": None if roi is None else np.array(roi, np.float32),
        "scales": None if scales is None else np.array(scales, np.float32),
        "sizes": None if sizes is None else np.array(sizes, np.int64),
    }


@pytest.mark.parametrize(
    ("attrs", "scale"),
    [
        ({"mode": "nearest"}, 2.5),
        ({"mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "asymmetric"}, 0.6),
        (
            {"mode": "nearest", "nearest_mode": "round_prefer_ceil", "coordinate_transformation_mode": "align_corners"},
            2.5,
        ),
        ({"mode": "linear"}, 2.5),
        ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, 0.6),
        ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, 0.6),
        ({"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"}, 2.5),
    ],
    ids=lambda a: "-".join(str(v) for v in a.values()) if isinstance(a, dict) else str(a),
)
def test_rank3_upsampling_along_length(attrs: dict[str, Any], scale: float) -> None:
    check_op("Resize", _resize(X3, attrs, scales=[1, 1, scale]), attrs, initializers=["scales"], opset=19)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_rank3_sizes_and_axes(mode: str) -> None:
    inputs = _resize(X3, {}, sizes=[2, 3, 16])
    check_op("Resize", inputs, {"mode": mode}, initializers=["sizes"], opset=19)
    inputs = _resize(X3, {}, sizes=[16])
    check_op("Resize", inputs, {"mode": mode, "axes": [-1]}, initializers=["sizes"], opset=19)


def test_rank3_antialiased_downsampling_and_crop() -> None:
    # both read tap tables: rank 3's H table is the one-tap identity
    attrs = {"mode": "linear", "antialias": 1}
    check_op("Resize", _resize(X3, attrs, scales=[1, 1, 0.45]), attrs, initializers=["scales"], opset=19)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 7.0}
    inputs = _resize(X3, attrs, sizes=[11], roi=[-0.2, 0.9])
    check_op("Resize", inputs, {**attrs, "axes": [2]}, initializers=["roi", "sizes"], opset=19)


def test_rank3_cubic_follows_the_onnx_reference() -> None:
    attrs = {"mode": "cubic"}
    inputs = _resize(X3, attrs, scales=[1, 1, 2.5])
    check_op("Resize", inputs, attrs, initializers=["scales"], opset=19, reference="onnx")


@pytest.mark.parametrize(
    ("attrs", "scales"),
    [
        ({"mode": "nearest"}, [1, 1, 2, 1.5, 0.6]),
        (
            {"mode": "nearest", "nearest_mode": "ceil", "coordinate_transformation_mode": "asymmetric"},
            [1, 1, 0.7, 2, 1],
        ),
        ({"mode": "linear"}, [1, 1, 2, 1.5, 0.6]),
        ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 1, 0.7, 2, 1]),
    ],
    ids=lambda a: "-".join(str(v) for v in (a.values() if isinstance(a, dict) else a)),
)
def test_rank5_resizes_depth_height_and_width(attrs: dict[str, Any], scales: list[float]) -> None:
    check_op("Resize", _resize(X5, attrs, scales=scales), attrs, initializers=["scales"], opset=19)


def test_rank5_sizes_on_axes_and_taps() -> None:
    attrs = {"mode": "linear", "axes": [2, 4]}
    check_op("Resize", _resize(X5, attrs, sizes=[5, 9]), attrs, initializers=["sizes"], opset=19)
    attrs = {"mode": "linear", "antialias": 1}
    check_op("Resize", _resize(X5, attrs, scales=[1, 1, 0.5, 0.6, 2]), attrs, initializers=["scales"], opset=19)


@pytest.mark.parametrize(
    ("shape", "scales", "message"),
    [
        ((4, 7), [2, 2], r"input 0 has rank 2; ranks 3 to 5"),
        ((1, 2, 7), [1, 2, 2], r"resize axis 1 \(scale 2.0.*only the spatial axes \(2\)"),
    ],
)
def test_unsupported_ranks_and_axes_name_the_node(shape: tuple[int, ...], scales: list[float], message: str) -> None:
    model = make_model("Resize", _resize(np.zeros(shape, np.float32), {}, scales=scales), initializers=["scales"])
    model.graph.node[0].name = "upsample"
    with pytest.raises(UnsupportedOpError, match=rf"node 'upsample' \(Resize.*{message}"):
        compile_model(model)
