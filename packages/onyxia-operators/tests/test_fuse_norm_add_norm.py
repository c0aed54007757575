"""FuseNormAddNorm: Gemma's sandwich norms (post-norm, residual add, pre-norm) as one NormAddNorm: golden
graph after the residual fusion, declined cases (graph unchanged, False, a reason), and outputs equal to
onnxruntime's on the unfused graph and, bit for bit, to the plan without the fusion."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import compile_model, runtime

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseNormAddNorm, FuseResidualRmsNorm

RNG = np.random.default_rng(29)
REGISTRY = core_operator_registry()
SLN = "SimplifiedLayerNormalization"
MS = "com.microsoft"


def _gemma_block(*, swapped: bool = False, inner_axis: int = -1, h_dims: tuple = ("seq", 8)) -> GraphBuilder:
    """onnx-community Gemma after an attention block: sum = Add(residual, SLN(h)); y = SLN(sum); the next
    residual Add reads sum."""
    b = GraphBuilder("block")
    residual = b.input("residual", DataType.FLOAT, ["seq", 8])
    h = b.input("h", DataType.FLOAT, list(h_dims))
    s1, s2 = (b.initializer(f"s{i}", np.ones(8, np.float32)) for i in (1, 2))
    normed = b.op(SLN, h, s1, axis=inner_axis, epsilon=1e-6, _name="post_attention_layernorm")
    total = b.op("Add", *((normed, residual) if swapped else (residual, normed)))
    y = b.op(SLN, total, s2, axis=-1, epsilon=1e-6, _name="pre_feedforward_layernorm")
    b.output(y, b.op("Add", total, y))
    ShapeInferencePass().run(b.graph, REGISTRY)
    FuseResidualRmsNorm().run(b.graph, REGISTRY)
    return b


def test_post_norm_add_and_pre_norm_become_one_op() -> None:
    b = _gemma_block()
    assert FuseNormAddNorm().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph block(
          %0:f32[seq,8]  # residual
          %1:f32[seq,8]  # h
        ) {
          %8:f32[seq,8], None, None, %6:f32[seq,8] = com.onyxia::NormAddNorm(%0, %1, %3, %2, epsilon=9.999999974752427e-07, skip_epsilon=9.999999974752427e-07)  # pre_feedforward_layernorm
          %10:f32[seq,8] = Add(%6, %8)  # Add_1
          return %8, %10
        }""")
    b.graph.check()
    assert not FuseNormAddNorm().run(b.graph, REGISTRY)  # settled


def test_the_norm_at_skip_input_0_fuses_too() -> None:
    b = _gemma_block(swapped=True)
    (skip_norm,) = b.graph.nodes_of("SkipSimplifiedLayerNormalization", MS)
    assert b.graph.tensor_producer(skip_norm.inputs[0]).op_type == SLN  # type: ignore[union-attr]
    assert FuseNormAddNorm().run(b.graph, REGISTRY)
    (fused,) = b.graph.nodes_of("NormAddNorm", "com.onyxia")
    assert [b.graph.tensor(t).name for t in fused.inputs[:2]] == ["residual", "h"]


def _with_bias() -> GraphBuilder:
    """onnxruntime-genai's Skip* with a bias input: NormAddNorm has none."""
    b = GraphBuilder("bias")
    residual, h = (b.input(n, DataType.FLOAT, [2, 8]) for n in ("residual", "h"))
    s1, s2, bias = (b.initializer(n, np.ones(8, np.float32)) for n in ("s1", "s2", "bias"))
    normed = b.op(SLN, h, s1, axis=-1)
    b.output(b.op("SkipSimplifiedLayerNormalization", residual, normed, s2, bias, _domain=MS))
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda: _gemma_block(inner_axis=0), "axis 0 is not the last axis"),
        (lambda: _gemma_block(h_dims=(1, 8)), "is broadcast against the residual"),
        (_with_bias, ""),  # the pattern does not match: no reason to give
    ],
    ids=["inner-axis", "broadcast-norm", "bias"],
)
def test_declines(build: Callable[[], GraphBuilder], reason: str, caplog: pytest.LogCaptureFixture) -> None:
    b = build()
    assert b.graph.nodes_of("SkipSimplifiedLayerNormalization", MS)
    before = str(b.graph)
    with caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite"):
        assert not FuseNormAddNorm().run(b.graph, REGISTRY)
    assert str(b.graph) == before
    assert reason in caplog.text


# ----- numerics ----------------------------------------------------------------------------------
def _model(dtype: type, hidden: int, layers: int) -> onnx.ModelProto:
    """`layers` Gemma blocks (block output = x * w, post-norm, residual add, pre-norm) and a final norm: each
    boundary is a sandwich (post_feedforward norm + residual + the next input norm)."""
    nodes: list[onnx.NodeProto] = []
    inits: dict[str, np.ndarray] = {}
    residual, h = "x", "x"
    for i in range(layers):
        inits[f"w{i}"] = (1 + 0.5 * RNG.standard_normal(hidden)).astype(dtype)
        for name in (f"post{i}", f"pre{i}"):
            inits[name] = (1 + 0.3 * RNG.standard_normal(hidden)).astype(dtype)
        nodes += [
            helper.make_node("Mul", [h, f"w{i}"], [f"o{i}"]),
            helper.make_node(SLN, [f"o{i}", f"post{i}"], [f"n{i}"], axis=-1, epsilon=1e-6),
            helper.make_node("Add", [residual, f"n{i}"], [f"sum{i}"]),
            helper.make_node(SLN, [f"sum{i}", f"pre{i}"], [f"h{i}"], axis=-1, epsilon=1e-5 * (i + 1)),
        ]
        residual, h = f"sum{i}", f"h{i}"
    return graph_model(nodes, {"x": (dtype, [1, "seq", hidden])}, inits, [h, residual])


@pytest.mark.parametrize(("dtype", "hidden"), [(np.float32, 640), (np.float32, 48), (np.float16, 256)])
def test_outputs_equal_onnxruntime_and_the_unfused_plan(dtype: type, hidden: int) -> None:
    model = _model(dtype, hidden, 3)
    assert ops_of(compile_model(model)).count("NormAddNorm") == 3
    feeds: list[dict[str, np.ndarray]] = [
        {"x": (3 * RNG.standard_normal((1, s, hidden))).astype(dtype)} for s in (5, 1)
    ]
    check_fused(model, feeds, {"FuseNormAddNorm"}, tolerance=(2e-2, 2e-2) if dtype == np.float16 else None)


def test_a_gpu_split_of_the_rows_sums_the_same_bits() -> None:
    """On a GPU a norm row's workgroup has one invocation per lane of the reduction tree (`row_lanes`), on
    lavapipe 16 holding several lanes each: the same tree, so the same bits; run here, on lavapipe."""
    from onyxia.core.adapter_facts import AdapterFacts, target_adapter

    model = _model(np.float32, 640, 2)
    with target_adapter(AdapterFacts(cpu=False, subgroups=True, subgroup_min_size=32, subgroup_max_size=32)):
        gpu_plan = compile_model(model)
    norms = [shader.source for shader in gpu_plan.shaders if "normalization" in shader.label]
    assert norms and all("@workgroup_size(256)" in source for source in norms)
    feeds = {"x": (3 * RNG.standard_normal((1, 4, 640))).astype(np.float32)}
    gpu_split = runtime().load_model(gpu_plan).run(dict(feeds))
    cpu_split = runtime().load_model(compile_model(model)).run(dict(feeds))
    for name, value in cpu_split.items():
        np.testing.assert_array_equal(gpu_split[name], value, err_msg=name)
