"""Nearest Resize's indices are settled on the host (`onyxia.operators.vision.resize_nearest`), so a tie breaks as
onnxruntime breaks it on every adapter: an H200 read row 1 for 2 -> 7 rows' row 3 (source coordinate 0.5 exactly,
round_prefer_floor: row 0) while the shader computed the coordinate in floats. Here: the integer maps equal
onnxruntime's float32 map, the shader computes no coordinate, and a symbolic axis's integer map against
onnxruntime where coordinates land on whole numbers."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_rebinding, compile_model, make_model

from onyxia.operators.vision.resize_nearest import nearest_axis, nearest_round, ort_coordinates

RNG = np.random.default_rng(27)
MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


@pytest.mark.parametrize("transform", ["half_pixel", "asymmetric"])
@pytest.mark.parametrize("nearest_mode", MODES)
def test_integer_maps_round_as_onnxruntime_float_map(transform: str, nearest_mode: str) -> None:
    """Every scale a symbolic axis may have (and 3.5, 1.5: sizes 2 -> 7, 6 -> 9), over sizes up to 10^5."""
    for scale in (1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 0.5, 0.25, 0.125, 3.5, 1.5):
        for size_in in (2, 3, 5, 7, 16, 33, 640, 4097, 100000):
            size_out = int(np.floor(np.float32(size_in) * np.float32(scale)))
            coordinates = ort_coordinates(transform, scale, size_in, size_out)
            expected = np.clip(nearest_round(coordinates, nearest_mode), 0, size_in - 1)
            symbolic = nearest_axis(transform, nearest_mode, scale, "H", "H2")
            assert symbolic is not None and symbolic.rational is not None
            np.testing.assert_array_equal(symbolic.indices(size_in, size_out), expected, f"{scale} {size_in}")


def test_a_tie_is_decided_on_the_host() -> None:
    rows = nearest_axis("half_pixel", "round_prefer_floor", 3.5, 2, 7)
    assert rows is not None
    np.testing.assert_array_equal(rows.indices(2, 7), [0, 0, 0, 0, 1, 1, 1])  # row 3: 0.5, a tie, goes down
    # 6 -> 7: onnxruntime divides by float32(7 / 6), not 7 / 6: a table of its float32 map, not an integer one
    rows = nearest_axis("half_pixel", "round_prefer_floor", float(np.float32(7) / np.float32(6)), 6, 7)
    assert rows is not None and rows.table is not None


def test_the_shader_computes_no_coordinate() -> None:
    x = RNG.standard_normal((1, 1, 2, 2)).astype(np.float32)
    inputs = {"x": x, "roi": None, "scales": None, "sizes": np.array([1, 1, 7, 8], np.int64)}
    model = make_model("Resize", inputs, {"mode": "nearest"}, opset=13, initializers=["sizes"])
    (source,) = [shader.source for shader in compile_model(model).shaders]
    assert "rational_index(" in source and " / den" not in source


@pytest.mark.parametrize(("transform", "nearest_mode"), [("half_pixel", "ceil"), ("asymmetric", "floor")])
def test_symbolic_axes_with_an_odd_scale_against_onnxruntime(transform: str, nearest_mode: str) -> None:
    """Scale 3 puts every third output on a whole input coordinate ((x - 1) / 3 under half_pixel, x / 3 under
    asymmetric), the boundary of ceil and floor, which a float quotient a little off would cross: one plan, two
    image sizes."""
    inputs = {"x": RNG.standard_normal((1, 2, 3, 4)).astype(np.float32), "roi": None}
    inputs["scales"] = np.array([1, 1, 3, 3], np.float32)
    attrs = {"mode": "nearest", "coordinate_transformation_mode": transform, "nearest_mode": nearest_mode}
    model = make_model("Resize", inputs, attrs, opset=13, initializers=["scales"])
    for axis, name in ((2, "H"), (3, "W")):
        model.graph.input[0].type.tensor_type.shape.dim[axis].dim_param = name
    check_rebinding(model, [{"x": RNG.standard_normal((1, 2, h, w)).astype(np.float32)} for h, w in ((3, 4), (5, 2))])
