"""Every row of the conv variant table (operators/vision/conv_variants.py), forced on lavapipe, against onnxruntime,
and the fused epilogues (vision/conv_fusion.py) on the tiled kernels.

Each case runs under every variant whose rule accepts it (1 x 1 convs under `pointwise`, one-channel groups under
`depthwise`, every forward conv with a compile-time W under `rows` and `direct`); a forced variant that does not
fit is an error, never a silent fallback. The plan's shader labels say which variant ran. Every variant also runs
with the batch and spatial dims symbolic (`OPEN`): one plan, fed two image sizes, and a grid past the adapter's
65,535 workgroups per dimension.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import assert_close, reference_outputs, runtime

from onyxia.compiler import CompilerPipeline
from onyxia.core import CompiledModel, OperatorRegistry, PlanningError
from onyxia.core.adapter_facts import AdapterFacts, force_variants, target_adapter
from onyxia.core.plan_steps import Dispatch
from onyxia.core.symbolic import evaluate_dim
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.passes import FuseConvEpilogue
from onyxia.operators.vision.conv import CONV_ONYXIA
from onyxia.operators.vision.conv_variants import FAMILY, VARIANTS, few_channels

RNG = np.random.default_rng(11)

# name -> (x shape, w shape, attributes)
CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = {
    "pointwise": ((1, 20, 9, 10), (36, 20, 1, 1), {}),
    "pointwise_vec4": ((2, 16, 8, 8), (12, 16, 1, 1), {}),
    "padded_3x3": ((1, 5, 11, 13), (9, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    "asymmetric_pads": ((1, 4, 7, 9), (6, 4, 3, 2), {"pads": [0, 2, 1, 0]}),
    "strided": ((1, 6, 17, 15), (10, 6, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "strided_1x1": ((1, 8, 9, 9), (5, 8, 1, 1), {"strides": [2, 2]}),
    "dilated": ((1, 3, 12, 12), (7, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "grouped": ((1, 12, 8, 9), (18, 4, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    "depthwise": ((1, 10, 14, 13), (10, 1, 3, 3), {"group": 10, "pads": [1, 1, 1, 1]}),
    "depthwise_strided_5x5": ((2, 6, 15, 16), (6, 1, 5, 5), {"group": 6, "strides": [2, 2], "pads": [2, 2, 2, 2]}),
    "depthwise_multiplier": ((1, 4, 9, 7), (8, 1, 3, 3), {"group": 4, "pads": [1, 0, 1, 2]}),
    # PP-LCNet's 5 x 5 on a two-row map: most window rows are padding, which the depthwise kernel skips
    "depthwise_5x5_two_rows": ((2, 8, 2, 21), (8, 1, 5, 5), {"group": 8, "pads": [2, 2, 2, 2]}),
    "conv1d": ((1, 16, 37), (24, 16, 7), {"pads": [3, 3]}),
    "conv3d": ((1, 3, 4, 6, 5), (4, 3, 2, 3, 3), {"pads": [0, 1, 1, 1, 1, 1]}),
    # few output channels (the pixel-lane rows): wide windows, rows and flat images past one workgroup's pixels
    "few_3x39": ((1, 4, 5, 150), (8, 4, 3, 39), {"pads": [1, 19, 1, 19]}),
    "few_11x11": ((1, 6, 14, 15), (3, 6, 11, 11), {"pads": [5, 5, 5, 5]}),
    "few_strided_dilated": (
        (1, 5, 13, 80),
        (6, 5, 3, 5),
        {"strides": [2, 3], "dilations": [1, 2], "pads": [1, 4, 0, 2]},
    ),
    "few_grouped": ((2, 12, 6, 70), (8, 3, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    "few_pointwise": ((1, 16, 9, 10), (3, 16, 1, 1), {}),
    "few_pointwise_vec4": ((2, 8, 8, 12), (5, 8, 1, 1), {}),
    "few_conv1d": ((1, 6, 301), (7, 6, 9), {"pads": [4, 4]}),
    "few_wide_32": ((1, 3, 9, 10), (32, 3, 7, 7), {"pads": [3, 3, 3, 3]}),
}


# a case run with its batch and spatial dims symbolic -> a second feed shape for the same plan; together they take
# every variant (the pixel-lane rows included: 10 and 3 output channels) with few distinct shaders
OPEN: dict[str, tuple[int, ...]] = {
    "strided": (2, 6, 9, 20),
    "few_pointwise": (2, 16, 6, 12),  # 90 pixels, then 72: x read as scalars, then as vec4s (POINTWISE)
    "depthwise_strided_5x5": (1, 6, 21, 11),
}


def _fits(variant: str, name: str) -> bool:
    x, w, attrs = CASES[name]
    one = all(k == 1 for k in w[2:]) and not any(attrs.get("pads", [])) and set(attrs.get("strides", [1])) == {1}
    row = next(v for v in VARIANTS if v.name == variant)
    few = few_channels(w[0] // attrs.get("group", 1), w[2:]) or not row.pixel_lanes
    return few and {"pointwise": one, "depthwise": w[1] == 1, "rows": True, "direct": True}[row.kernel]


PAIRS = [(v.name, name) for v in VARIANTS for name in CASES if _fits(v.name, name)]
OPEN_PAIRS = [(v.name, name) for v in VARIANTS for name in OPEN if _fits(v.name, name) and v.kernel != "direct"]
OPEN_PAIRS.append(("direct", "strided"))


def _conv_model(
    x: tuple[int, ...],
    w: tuple[int, ...],
    attrs: dict[str, Any],
    tail: list[onnx.NodeProto] | None = None,
    declared: list[int | str] | None = None,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The conv (and `tail`) with x declared as `declared` (named dims symbolic), else as `x`; feeds at `x`."""
    weights = {"w": RNG.standard_normal(w).astype(np.float32) * 0.3, "b": RNG.standard_normal(w[0]).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y" if not tail else "conv"], **attrs), *(tail or [])]
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, declared or list(x))],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    return model, {"x": RNG.standard_normal(x).astype(np.float32)}


def _registry() -> OperatorRegistry:
    """The built-in registry plus FusedConv and FuseConvEpilogue (before FuseElementwise)."""
    registry = core_operator_registry().register_family(ONYXIA_DOMAIN, CONV_ONYXIA)
    names = [p.name for p in registry.passes]
    if "FuseConvEpilogue" not in names:
        registry.passes.insert(names.index("FuseElementwise"), FuseConvEpilogue())
    return registry


def _compile(model: onnx.ModelProto, registry: OperatorRegistry | None = None) -> CompiledModel:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "model.onnx")
        onnx.save_model(model, path)
        graph = load_and_parse_model(path)
    return CompilerPipeline(registry or core_operator_registry()).compile(graph, {})


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], registry: OperatorRegistry | None = None) -> set[str]:
    """Onyxia matches onnxruntime on `model`; returns the plan's conv shader labels."""
    plan = _compile(model, registry)
    got = runtime().load_model(plan).run(dict(feeds))
    (expected,) = reference_outputs(model, feeds, "ort")
    assert_close(got["y"], expected, "y")
    return {s.label for s in plan.shaders if s.label.startswith("vision/conv")}


@pytest.mark.parametrize(("variant", "case"), PAIRS)
def test_variant_matches_onnxruntime(variant: str, case: str) -> None:
    model, feeds = _conv_model(*CASES[case])
    with force_variants({FAMILY: variant}):
        labels = _run(model, feeds)
    assert labels and all(label.endswith(f"@{variant}") for label in labels), labels


def _declared(x: tuple[int, ...]) -> list[int | str]:
    """x's dims with the batch and the spatial ones named (symbolic), the channels kept."""
    return ["n", x[1], *("dhw"[-(len(x) - 2) :])]


@pytest.mark.parametrize(("variant", "case"), OPEN_PAIRS)
def test_variant_at_symbolic_spatial_dims(variant: str, case: str) -> None:
    """One plan compiled with the batch and spatial dims open runs the same tiled kernel at two image sizes,
    both equal to onnxruntime, without compiling anything for the second."""
    x, w, attrs = CASES[case]
    model, feeds = _conv_model(x, w, attrs, declared=_declared(x))
    with force_variants({FAMILY: variant}):
        plan = _compile(model)
    labels = {s.label for s in plan.shaders if s.label.startswith("vision/conv")}
    assert labels and all(label.endswith(f"@{variant}") for label in labels), labels
    executor = runtime().load_model(plan)
    modules = executor.stats.shader_modules_created
    for shape in (x, OPEN[case]):
        feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
        (expected,) = reference_outputs(model, feeds, "ort")
        assert_close(executor.run(dict(feeds))["y"], expected, f"y at {shape}")
    assert (executor.stats.plan_switches, executor.stats.shader_modules_created) == (0, modules)


def _workgroups(plan: CompiledModel, dims: dict[str, int]) -> int:
    """The largest dispatch's workgroups at `dims` (POINTWISE plans two, one of them 0)."""
    steps = [s for op in plan.operations for s in op.steps if isinstance(s, Dispatch)]
    return max(math.prod(evaluate_dim(d, dims) for d in step.workgroups) for step in steps)


@pytest.mark.parametrize(
    ("variant", "x", "w", "group"),
    [("depthwise_simd", (1, 33, 8, 6), (33, 1, 3, 3), 33), ("pointwise", (1, 2, 5, 9), (4, 2, 1, 1), 1)],
)
def test_grid_past_the_per_dimension_limit(variant: str, x: tuple[int, ...], w: tuple[int, ...], group: int) -> None:
    """An open plan run at an image whose linear grid exceeds 65,535 workgroups: the runtime folds it into
    (x, y) and the kernels rebuild their index, so the large image matches onnxruntime too."""
    model, _ = _conv_model(
        x, w, {"group": group, "pads": [1, 1, 1, 1] if w[2] == 3 else [0] * 4}, declared=_declared(x)
    )
    with force_variants({FAMILY: variant}):
        plan = _compile(model)
    executor = runtime().load_model(plan)
    big = (1, x[1], 256, 256) if variant.startswith("depthwise") else (1, x[1], 512, 1040)
    assert _workgroups(plan, {"n": 1, "h": big[2], "w": big[3]}) > 65535
    for shape in (x, big):
        feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
        (expected,) = reference_outputs(model, feeds, "ort")
        assert_close(executor.run(dict(feeds))["y"], expected, f"y at {shape}")


def test_every_variant_is_exercised() -> None:
    assert {v for v, _ in PAIRS} == {v.name for v in VARIANTS}
    assert {v for v, _ in OPEN_PAIRS} == {v.name for v in VARIANTS}, "every variant at symbolic dims"


@pytest.mark.parametrize(("variant", "case"), [("pointwise", "padded_3x3"), ("depthwise", "grouped")])
def test_forced_variant_that_does_not_fit_is_an_error(variant: str, case: str) -> None:
    model, _ = _conv_model(*CASES[case])
    with force_variants({FAMILY: variant}), pytest.raises(PlanningError, match="does not fit"):
        _compile(model)


@pytest.mark.parametrize(
    ("case", "expected"),
    [("pointwise", "pointwise"), ("padded_3x3", "rows"), ("depthwise", "depthwise"), ("strided_1x1", "rows")],
)
def test_choice_by_shape_and_adapter(case: str, expected: str) -> None:
    """lavapipe's facts pick the CPU rows; a GPU's facts the `_gpu` rows of the same kernel."""
    model, _ = _conv_model(*CASES[case])
    for facts, suffix in (
        (AdapterFacts(), ""),
        (AdapterFacts(cpu=False, subgroups=True, subgroup_min_size=32), "_gpu"),
    ):
        with target_adapter(facts):
            labels = {s.label for s in _compile(model).shaders if s.label.startswith("vision/conv")}
        assert labels == {f"vision/conv_{'depthwise' if expected == 'depthwise' else 'gemm'}@{expected}{suffix}"}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("few_3x39", "conv_gemm@rows_few"),
        ("few_wide_32", "conv_gemm@rows_few"),
        ("strided", "conv_gemm@rows_few"),
        ("few_pointwise", "conv_gemm@pointwise_few"),
        ("conv1d", "conv_gemm@rows_simd"),
        ("pointwise", "conv_gemm@pointwise_simd"),
        ("depthwise", "conv_depthwise@depthwise_simd"),
    ],
)
def test_few_channels_take_the_pixel_lane_rows(case: str, expected: str) -> None:
    """On a CPU rasteriser with subgroups (lavapipe as the runtime opens it) few output channels per group, or up
    to 32 with a wide window, take the pixel-lane rows; more, and depthwise convs, keep theirs."""
    model, _ = _conv_model(*CASES[case])
    with target_adapter(AdapterFacts(cpu=True, subgroups=True, subgroup_min_size=8, subgroup_max_size=8)):
        labels = {s.label for s in _compile(model).shaders if s.label.startswith("vision/conv")}
    assert labels == {f"vision/{expected}"}


def test_runtime_weights_take_the_direct_kernel() -> None:
    """W computed at run time (here W * 1 of a graph input) cannot be pre-packed: the direct kernel runs it."""
    x, w, attrs = CASES["padded_3x3"]
    nodes = [helper.make_node("Mul", ["wx", "one"], ["wr"]), helper.make_node("Conv", ["x", "wr"], ["y"], **attrs)]
    graph = helper.make_graph(
        nodes,
        "conv",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x)),
            helper.make_tensor_value_info("wx", onnx.TensorProto.FLOAT, list(w)),
        ],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(np.ones(1, np.float32), "one")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    feeds = {"x": RNG.standard_normal(x).astype(np.float32), "wx": RNG.standard_normal(w).astype(np.float32)}
    assert _run(model, feeds) == {"vision/conv@direct"}


def _const(name: str, value: float) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, np.float32)))


# epilogue -> nodes after the conv (reading "conv", writing "y"); "x" is also the residual where shapes allow
EPILOGUES: dict[str, list[onnx.NodeProto]] = {
    "relu": [helper.make_node("Relu", ["conv"], ["y"])],
    "silu": [helper.make_node("Sigmoid", ["conv"], ["s"]), helper.make_node("Mul", ["s", "conv"], ["y"])],
    "sigmoid": [helper.make_node("Sigmoid", ["conv"], ["y"])],
    "hardswish": [helper.make_node("HardSwish", ["conv"], ["y"])],
    "leaky_relu": [helper.make_node("LeakyRelu", ["conv"], ["y"], alpha=0.2)],
    "clip": [_const("lo", 0.0), _const("hi", 0.5), helper.make_node("Clip", ["conv", "lo", "hi"], ["y"])],
    "residual": [helper.make_node("Add", ["x", "conv"], ["y"])],
    "silu_residual": [
        helper.make_node("Sigmoid", ["conv"], ["s"]),
        helper.make_node("Mul", ["conv", "s"], ["a"]),
        helper.make_node("Add", ["a", "x"], ["y"]),
    ],
}


@pytest.mark.parametrize("variant", ["pointwise", "rows", "depthwise", "direct"])
@pytest.mark.parametrize("epilogue", list(EPILOGUES))
def test_fused_epilogue(variant: str, epilogue: str) -> None:
    """One FusedConv kernel per conv and its tail, equal to onnxruntime's unfused graph, on every kernel."""
    case = {"pointwise": "pointwise_vec4", "depthwise": "depthwise"}.get(variant, "padded_3x3")
    x, w, attrs = CASES[case]
    if epilogue.endswith("residual"):  # the residual is x itself: same channels in and out
        w = (x[1], *w[1:])
    model, feeds = _conv_model(x, w, attrs, EPILOGUES[epilogue])
    with force_variants({FAMILY: variant}):
        plan = _compile(model, _registry())
        labels = _run(model, feeds, _registry())
    assert all(label.endswith(f"@{variant}") for label in labels), labels
    assert [s.label for s in plan.shaders if not s.label.startswith("vision/conv")] == [], "the tail still runs"


def test_conv_output_read_elsewhere_is_not_fused() -> None:
    x, w, attrs = CASES["padded_3x3"]
    tail = [
        helper.make_node("Relu", ["conv"], ["r"]),
        helper.make_node("Add", ["r", "conv"], ["y"]),
    ]
    model, feeds = _conv_model(x, w, attrs, tail)
    plan = _compile(model, _registry())
    _run(model, feeds, _registry())
    assert any(not s.label.startswith("vision/conv") for s in plan.shaders), "the Relu's input is also the Add's"
