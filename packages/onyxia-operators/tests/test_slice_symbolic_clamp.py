"""Slice with static bounds over a symbolic dim: one plan, clamped as onnxruntime clamps at every run-time size.

ONNX clamps starts and ends to ``[0, dim]`` (``[-1, dim - 1]`` for negative steps) after adding ``dim``
to negative ones. Over a symbolic dim the compile cannot clamp with ints, so the clamp is written as
``min``/``max`` dim expressions the runtime evaluates per run: ``x[n][0:10]`` is ``min(10, n)`` long
(at n=4 it once read 10 elements, past the end), ``x[n][-5:]`` starts at ``max(0, n - 5)`` (at n=4 it
once refused the run: ``n - 5`` is -1). Each case is one compiled plan fed at several sizes, with no
new pipeline per size; all cases share the one strided-copy kernel, so the suite compiles few shaders.
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_rebinding, compile_model, make_model

from onyxia.core import SymbolicExpr

I64_MAX, I64_MIN = 2**63 - 1, -(2**63)  # what exporters write for "to the end"
SIZES = (1, 4, 7, 12)

# (starts, ends, steps) over x[n]; each is outside [0, n] for some of SIZES
CASES = [
    ([0], [10], [1]),  # the review's repro: a static end past the dim
    ([2], [I64_MAX], [1]),
    ([-5], [I64_MAX], [1]),  # a negative start past a short dim: the whole input
    ([-1], [I64_MAX], [1]),  # the last element, as LLM exports take the last token
    ([1], [-1], [2]),
    ([3], [9], [2]),  # empty where n <= 3
    ([9], [I64_MIN], [-1]),  # negative step from past the end down to the start
    ([-2], [-9], [-2]),
    ([I64_MAX], [0], [-3]),
]


def _model(starts: list[int], ends: list[int], steps: list[int]) -> object:
    args = (("starts", starts), ("ends", ends), ("axes", [0]), ("steps", steps))  # ONNX's input order
    inputs = {"x": np.zeros(4, np.float32), **{k: np.array(v, np.int64) for k, v in args}}
    return make_model("Slice", inputs, initializers=["starts", "ends", "axes", "steps"], dim_params={"x": ["n"]})


@pytest.mark.parametrize(("starts", "ends", "steps"), CASES, ids=str)
def test_static_bounds_over_a_symbolic_dim_match_onnxruntime_at_every_size(
    starts: list[int], ends: list[int], steps: list[int]
) -> None:
    feeds = [{"x": np.arange(n, dtype=np.float32) + 1} for n in SIZES]
    check_rebinding(_model(starts, ends, steps), feeds)


def test_the_output_dim_is_a_clamp_expression_and_in_range_windows_stay_plain() -> None:
    n = SymbolicExpr.name("n")
    plan = compile_model(_model([0], [10], [1]))
    out = plan.tensors[plan.outputs[0]].dims
    assert out == (SymbolicExpr.binary("min", n, 10),)
    assert out[0].evaluate({"n": 4}) == 4 and out[0].evaluate({"n": 40}) == 10
    tail = compile_model(_model([-5], [I64_MAX], [1]))
    assert tail.tensors[tail.outputs[0]].dims == (SymbolicExpr.binary("min", n, 5),)
    whole = compile_model(_model([0], [I64_MAX], [1]))
    assert whole.tensors[whole.outputs[0]].dims == (n,)  # no clamp where it cannot bite


def test_a_rank_2_slice_clamps_only_the_symbolic_axis() -> None:
    inputs = {
        "x": np.zeros((4, 3), np.float32),
        "starts": np.array([-6, 1], np.int64),
        "ends": np.array([I64_MAX, 7], np.int64),
        "axes": np.array([0, 1], np.int64),
    }
    model = make_model("Slice", inputs, initializers=["starts", "ends", "axes"], dim_params={"x": ["n", 3]})
    check_rebinding(model, [{"x": np.arange(3 * n, dtype=np.float32).reshape(n, 3)} for n in (2, 6, 9)])
