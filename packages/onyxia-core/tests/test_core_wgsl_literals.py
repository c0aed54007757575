"""`wgsl_literal` / `wgsl_dim`: every Python number that reaches shader text is valid WGSL or a
compile-time `PlanningError` (issue 15, "values in shaders"). GPU round trips of these literals are
in onyxia-operators' test_shader_literals.py; here the text itself is checked."""

from __future__ import annotations

import numpy as np
import pytest

from onyxia.core import DataType, PlanningError, ShaderError, preprocess, wgsl_dim, wgsl_literal
from onyxia.core.shader_dims import shader_dims


@pytest.mark.parametrize(
    ("dtype", "value", "text"),
    [
        (DataType.FLOAT, 0.1, "0.1f"),
        (DataType.FLOAT, 3, "3.0f"),
        (DataType.FLOAT, -0.0, "-0.0f"),
        (DataType.FLOAT, 1e38, "1e+38f"),
        (DataType.FLOAT, 1e-45, "1e-45f"),  # the smallest f32 subnormal
        (DataType.FLOAT, float("inf"), "bitcast<f32>(0x7f800000u)"),
        (DataType.FLOAT, float("-inf"), "bitcast<f32>(0xff800000u)"),
        (DataType.FLOAT, float("nan"), "bitcast<f32>(0x7fc00000u)"),
        (DataType.FLOAT, 1e39, "bitcast<f32>(0x7f800000u)"),  # rounds to f32 first: inf, as ORT's float attribute
        (DataType.FLOAT16, 0.5, "0.5h"),
        (DataType.FLOAT16, 65504.0, "6.55e+04h"),  # f16's largest finite value, shortest digits
        (DataType.FLOAT16, 1e5, "f16(bitcast<f32>(0x7f800000u))"),  # beyond f16: IEEE overflow to inf
        (DataType.FLOAT16, float("-inf"), "f16(bitcast<f32>(0xff800000u))"),
        (DataType.FLOAT16, float("nan"), "f16(bitcast<f32>(0x7fc00000u))"),
        (DataType.DOUBLE, 0.1, "0.1f"),  # float64 is stored as f32: rounded to f32's shortest digits
        (DataType.DOUBLE, 1e300, "bitcast<f32>(0x7f800000u)"),  # beyond f32: IEEE overflow to inf
        (DataType.INT32, 7, "7i"),
        (DataType.INT32, -(2**31), "i32(-2147483648)"),  # `-2147483648i` negates an out-of-range literal
        (DataType.INT64, 2**31 - 1, "2147483647i"),  # int64 is stored as i32
        (DataType.INT32, 4.0, "4i"),
        (DataType.UINT32, 2**32 - 1, "4294967295u"),
        (DataType.UINT8, 255, "255u"),
        (DataType.BOOL, True, "1u"),
        (DataType.BOOL, 0, "0u"),
    ],
)
def test_literal_text(dtype: DataType, value: float, text: str) -> None:
    assert wgsl_literal(dtype, value) == text


def test_f32_literals_round_trip_exactly() -> None:
    """The digits parse back (as WGSL's f32 parser does, straight to f32) to the very same bits."""
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    for value in values[np.isfinite(values)]:
        text = wgsl_literal(DataType.FLOAT, value)
        assert text.endswith("f")
        parsed = np.float32(text[:-1])
        assert parsed.view(np.uint32) == value.view(np.uint32), (value, text)


def test_f16_literals_round_trip_exactly() -> None:
    for value in np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16):
        text = wgsl_literal(DataType.FLOAT16, value)
        if np.isfinite(value):
            assert np.float16(text[:-1]).view(np.uint16) == value.view(np.uint16), (value, text)
        else:
            assert text.startswith("f16(bitcast<f32>(")


@pytest.mark.parametrize(
    ("dtype", "value", "match"),
    [
        (
            DataType.INT32,
            2**31,
            r"node 'n' \(Clip\): input 1 \(int32, stored as i32\): 2147483648 is out of i32's range",
        ),
        (DataType.INT64, -(2**31) - 1, r"int64, stored as i32\): -2147483649 is out of i32's range"),
        (DataType.UINT32, -1, r"-1 is out of u32's range \[0, 4294967295\]"),
        (DataType.UINT8, 2**40, r"is out of u32's range"),
        (DataType.INT32, 1.5, r"expected an integer, found 1.5"),
        (DataType.INT32, float("inf"), r"expected an integer, found inf"),
        (DataType.BFLOAT16, 1.0, r"bfloat16 has no WGSL storage type"),
    ],
)
def test_literal_out_of_range_is_a_planning_error(dtype: DataType, value: float, match: str) -> None:
    with pytest.raises(PlanningError, match=match):
        wgsl_literal(dtype, value, "node 'n' (Clip): input 1")


def test_dims() -> None:
    assert wgsl_dim(0, "d") == "0u"
    assert wgsl_dim(2**32 - 1, "d") == "4294967295u"
    assert wgsl_dim(-3, "d") == "bitcast<u32>(-3i)"
    assert wgsl_dim(-(2**31), "d") == "bitcast<u32>(i32(-2147483648))"
    with pytest.raises(PlanningError, match=r"shader 's': dim N = 4294967296 does not fit the kernels' 32-bit"):
        wgsl_dim(2**32, "shader 's': dim N")
    with pytest.raises(PlanningError, match=r"-2147483649 is out of i32's range"):
        wgsl_dim(-(2**31) - 1, "shader 's': dim P")


def test_shader_dims_refuse_a_dim_beyond_u32() -> None:
    assert shader_dims("s", {}, {"N": 8, "OUT": [2, 3]}).defs == {"N": "8u", "OUT": "2u, 3u"}
    with pytest.raises(PlanningError, match=r"shader 's': dim OUT_1 = 8589934592 does not fit"):
        shader_dims("s", {}, {"OUT": [2, 2**33]})


@pytest.mark.parametrize("value", [float("inf"), float("nan"), np.float32("-inf")])
def test_preprocess_refuses_a_non_finite_def(value: float) -> None:
    """A float def pasted as ``str(value)`` would read ``inf``: refused while compiling, naming the def."""
    with pytest.raises(ShaderError, match=r"shader 'k' line 1: shader def 'ALPHA' is -?(inf|nan)"):
        preprocess("let a = #{ALPHA};", {"ALPHA": value}, "k")
    assert preprocess("let a = #{ALPHA};", {"ALPHA": 0.5}, "k") == "let a = 0.5;"


def test_preprocess_refuses_an_int_def_beyond_32_bits() -> None:
    with pytest.raises(ShaderError, match=r"shader def 'WINDOW' = 1099511627776 fits neither i32 nor u32"):
        preprocess("let w = #{WINDOW};", {"WINDOW": 2**40}, "k")
    assert preprocess("let w = #{W}u;", {"W": 2**32 - 1}, "k") == "let w = 4294967295u;"
