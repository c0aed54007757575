"""Every row of the matmul variant table (operators/matmul/variants.py), forced on lavapipe, against onnxruntime.

lavapipe exposes subgroups (8 lanes) and f16, so the GPU rows compile and run here too: each product kernel
(weight panels, runtime operands, the one-row transposed product, groups, the gated MLP, 4-bit weights at
accuracy levels 0 and 4) at a decode step (M = 1) and a prefill (M = 128), with ragged K and N. The choice
itself is tested on `AdapterFacts`: lavapipe's facts (subgroups) pick `simd8_shared`, a CPU rasteriser without
subgroups `simd8`, a GPU with 32-lane subgroups `subgroup`.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import check_model, check_rebinding, compile_model, make_model
from test_matmulnbits_ort import F32_TOLERANCE, INT8_TOLERANCE, quantized_weights

from onyxia.core import CompiledModel, PlanningError
from onyxia.core.adapter_facts import AdapterFacts, force_variants, target_adapter
from onyxia.operators.matmul.tiles import Tile
from onyxia.operators.matmul.variants import FAMILY, VARIANTS, Needs, Variant, chosen_variant

NAMES = [v.name for v in VARIANTS]
RNG = np.random.default_rng(5)
ROWS = [1, 128]


def _random(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _labels(plan: CompiledModel) -> set[str]:
    return {s.label for s in plan.shaders if "@" in s.label}


def _graph_model(
    nodes: list[onnx.NodeProto], x_shape: list[int | str], inits: dict[str, np.ndarray]
) -> onnx.ModelProto:
    outputs = sorted({o for node in nodes for o in node.output if o.startswith("y")})
    graph = helper.make_graph(
        nodes,
        "variants",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _check(variant: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], **kwargs: object) -> None:
    """The model under `variant` matches onnxruntime, and every product shader says it ran that variant."""
    with force_variants({FAMILY: variant}):
        plan = compile_model(model)
        check_model(model, feeds, **kwargs)  # type: ignore[arg-type]
    labels = _labels(plan)
    assert labels and all(label.endswith(f"@{variant}") for label in labels), labels


@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("variant", NAMES)
def test_weight_products(variant: str, m: int) -> None:
    """MatMul by a weight (K not a multiple of 4), a q/k/v-like group and a gated MLP, one symbolic-M plan."""
    inits = {"w": _random(37, 45) * 0.2, "q": _random(36, 24) * 0.2, "k": _random(36, 8) * 0.2}
    inits |= {"g": _random(36, 20) * 0.2, "u": _random(36, 20) * 0.2}
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["y0"]),
        helper.make_node("Slice", ["x", "s0", "s36", "ax"], ["x36"]),
        helper.make_node("MatMul", ["x36", "q"], ["y1"]),
        helper.make_node("MatMul", ["x36", "k"], ["y2"]),
        helper.make_node("MatMul", ["x36", "g"], ["gate"]),
        helper.make_node("MatMul", ["x36", "u"], ["up"]),
        helper.make_node("Gelu", ["gate"], ["act"], approximate="tanh"),
        helper.make_node("Mul", ["act", "up"], ["y3"]),
    ]
    consts = {"s0": np.array([0]), "s36": np.array([36]), "ax": np.array([1])}
    model = _graph_model(nodes, ["seq", 37], inits | consts)
    _check(variant, model, {"x": _random(m, 37)}, tolerance=(1e-4, 2e-5))


@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("variant", NAMES)
def test_runtime_operands_and_transposed_rows(variant: str, m: int) -> None:
    """matmul.wgsl (both operands at run time, a batch) and MatMulTransB's one-row kernel (a tied lm head)."""
    a, b = _random(2, m, 33), _random(2, 33, 19)
    _check(variant, make_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b})
    embed = _random(50, 64)
    nodes = [
        helper.make_node("Transpose", ["e"], ["et"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "et"], ["y0"]),
        helper.make_node("Add", ["e", "e"], ["y1"]),  # keeps the embedding a graph tensor, as a tied embedding is
    ]
    _check(variant, _graph_model(nodes, ["seq", 64], {"e": embed}), {"x": _random(m, 64)})


@pytest.mark.parametrize("level", [0, 4])
@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("variant", NAMES)
def test_four_bit_weights(variant: str, m: int, level: int) -> None:
    """MatMulNBits with dequantization in the kernel: K with a tail block, N not a multiple of any panel."""
    k, n, block = 80, 45, 32
    weights = quantized_weights(k, n, block, "packed", np.float32, seed=m + level)
    inputs = {"A": _random(m, k), **weights}
    attrs = {"K": k, "N": n, "bits": 4, "block_size": block, "accuracy_level": level}
    model = make_model(
        "MatMulNBits",
        inputs,
        attrs,
        domain="com.microsoft",
        initializers=list(weights),
        dim_params={"A": ["seq", k]},
    )
    tolerance = INT8_TOLERANCE if level == 4 else F32_TOLERANCE
    _check(variant, model, {"A": inputs["A"]}, tolerance=tolerance)


def test_subgroup_split_needs_the_feature() -> None:
    """The subgroup variant's decode kernel adds its split-K sums by shuffles: the plan requires 'subgroup'."""
    k, n = 64, 24
    weights = quantized_weights(k, n, 32, "none", np.float32)
    attrs = {"K": k, "N": n, "bits": 4, "block_size": 32}
    model = make_model(
        "MatMulNBits", {"A": _random(1, k), **weights}, attrs, domain="com.microsoft", initializers=list(weights)
    )
    with force_variants({FAMILY: "subgroup"}):
        assert "subgroup" in compile_model(model).required_features
    with force_variants({FAMILY: "portable"}):
        assert "subgroup" not in compile_model(model).required_features


def test_shared_a_needs_the_feature_and_one_row_high_tiles() -> None:
    """simd8_shared broadcasts a's values across a subgroup: its plans require 'subgroup' (simd8's do not), and a
    table row whose shared kernels have a tile more than one invocation high (a subgroup could span two row
    blocks) is refused when the table is built."""
    model = make_model("MatMul", {"a": _random(4, 36), "b": _random(36, 8)}, initializers=["b"])
    with force_variants({FAMILY: "simd8_shared"}):
        assert "subgroup" in compile_model(model).required_features
    with force_variants({FAMILY: "simd8"}):
        assert "subgroup" not in compile_model(model).required_features
    tall: dict[str, tuple[Tile, ...]] = {"matmul_group": (Tile("tall", rows=4, wg_x=16, wg_y=4),)}
    with pytest.raises(PlanningError, match="matmul_group/tall have WG_Y > 1"):
        Variant("tall", Needs(), tall, {}, shared_a=True)


@pytest.mark.parametrize("variant", ["simd8_shared", "simd8"])
def test_a_symbolic_m_runs_each_tile_in_one_plan(variant: str) -> None:
    """One plan of a symbolic M holds the decode, few-rows and many-rows tiles; each run dispatches the one its M
    falls in (1, 9, 40 rows), with no new pipeline, and every run matches onnxruntime."""
    model = make_model(
        "MatMul", {"a": _random(1, 44), "b": _random(44, 72)}, initializers=["b"], dim_params={"a": ["seq", 44]}
    )
    with force_variants({FAMILY: variant}):
        assert len(compile_model(model).shaders) == 3
        check_rebinding(model, [{"a": _random(m, 44)} for m in (1, 9, 40, 1)])


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (AdapterFacts(), "simd8"),  # no device given: lavapipe
        (AdapterFacts(cpu=True, subgroups=True, subgroup_min_size=4, subgroup_max_size=128), "simd8_shared"),
        (AdapterFacts(cpu=True), "simd8"),  # a CPU rasteriser opened without subgroups
        (AdapterFacts(cpu=False, subgroups=True, subgroup_min_size=32, subgroup_max_size=32), "subgroup"),
        (AdapterFacts(cpu=False, subgroups=True, subgroup_min_size=4, subgroup_max_size=64), "portable"),
        (AdapterFacts(cpu=False), "portable"),
    ],
    ids=["default", "lavapipe", "cpu-no-subgroups", "warp32", "narrow-subgroups", "no-subgroups"],
)
def test_the_table_picks_by_adapter_facts(facts: AdapterFacts, expected: str) -> None:
    with target_adapter(facts):
        assert chosen_variant().name == expected


def test_an_unknown_forced_variant_is_refused() -> None:
    with force_variants({FAMILY: "tensor_cores"}), pytest.raises(Exception, match="no variant 'tensor_cores'"):
        chosen_variant()
