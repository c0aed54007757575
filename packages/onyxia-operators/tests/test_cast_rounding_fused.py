"""A float32 -> float16 -> float32 Cast pair rounds through float16 fused or not, as onnxruntime does.

Inside one fused shader the pair is f32(f16(x)), which lavapipe compiles to x (so does
pack2x16float/unpack2x16float); the fused kernel rounds explicitly (fused.wgsl's round_to_f16).
The values sit where rounding shows: between f16 neighbours near 1202 and 2049 (ties to even),
f16 subnormals and the halfway points below them, 65504 and the overflow to inf past 65520, NaN, -0.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, compile_model

_TINY = 2.0**-24  # the smallest f16 subnormal
VALUES = np.array(
    [
        1202.3, 1202.7, -1203.1, 2049.0, 2051.0, 0.1, 1e-6, 6e-8, 3e-8, 2.9e-8, -3e-8, 1.5 * _TINY, 2.5 * _TINY,
        2.0**-14 - _TINY / 4, 65504.0, 65519.0, 65520.0, -65520.0, 1e5, 3e38, np.inf, -np.inf, np.nan, -0.0, 1e-40,
    ],
    dtype=np.float32,
)  # fmt: skip


def _model(*, fused: bool, like: bool) -> onnx.ModelProto:
    """y = Cast(Cast(x * 1, float16), float32) + 0 over x[n] (n symbolic: one shader for every length); unfused, the float16 value is also an output,
    so it is written to memory between two kernels."""
    to16 = (
        helper.make_node("CastLike", ["a", "half_like"], ["h"])
        if like
        else helper.make_node("Cast", ["a"], ["h"], to=TensorProto.FLOAT16)
    )
    to32 = helper.make_node("CastLike", ["h", "one"], ["b"]) if like else helper.make_node("Cast", ["h"], ["b"], to=1)
    nodes = [helper.make_node("Mul", ["x", "one"], ["a"]), to16, to32, helper.make_node("Add", ["b", "zero"], ["y"])]
    inits = [
        numpy_helper.from_array(np.array(1, np.float32), "one"),
        numpy_helper.from_array(np.array(0, np.float32), "zero"),
    ]
    if like:
        inits.append(numpy_helper.from_array(np.array([0], np.float16), "half_like"))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])]
    if not fused:
        outputs.append(helper.make_tensor_value_info("h", TensorProto.FLOAT16, ["n"]))
    graph = helper.make_graph(
        nodes, "cast_pair", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])], outputs, inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("like", [False, True], ids=["Cast", "CastLike"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
def test_float16_round_trip_matches_onnxruntime(fused: bool, like: bool) -> None:
    model = _model(fused=fused, like=like)
    kernels = [op.op_type for op in compile_model(model).operations]
    assert len(kernels) == (1 if fused else 2), kernels  # unfused: the float16 value goes through memory
    # every value must come back exactly: a tolerance would hide a missed rounding of 0.3 near 1202
    check_model(model, {"x": VALUES}, tolerance=(0.0, 0.0))


def test_rounding_is_exact_between_every_float16_pair() -> None:
    """Halfway points between consecutive f16 values (every 7th pair, subnormals included), the f32
    values either side of them and their negatives: each rounds as onnxruntime rounds."""
    low = np.arange(0, 0x7BFF, 7, dtype=np.uint16).view(np.float16)
    high = np.nextafter(low, np.float16(np.inf))
    mid = ((low.astype(np.float64) + high.astype(np.float64)) / 2).astype(np.float32)  # exact in f32
    x = np.concatenate([mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf))])
    check_model(_model(fused=True, like=False), {"x": np.concatenate([x, -x])}, tolerance=(0.0, 0.0))
