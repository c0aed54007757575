"""FuseResidualRmsNorm: the graph before and after, the declined cases (graph unchanged, False, a reason),
and model outputs unchanged against onnxruntime."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, TensorDef
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseResidualRmsNorm

RNG = np.random.default_rng(5)
REGISTRY = core_operator_registry()
SLN = "SimplifiedLayerNormalization"


def _block(*, sum_used_again: bool = True, **norm_attrs: Any) -> tuple[GraphBuilder, TensorDef]:
    """onnx-community Gemma: sum = Add(residual, SLN(h)); y = SLN(sum); the next residual Add reads sum."""
    b = GraphBuilder("block")
    residual = b.input("residual", DataType.FLOAT, ["seq", 8])
    h = b.input("h", DataType.FLOAT, ["seq", 8])
    s1, s2 = (b.initializer(f"s{i}", np.ones(8, np.float32)) for i in (1, 2))
    total = b.op("Add", residual, b.op(SLN, h, s1, axis=-1, epsilon=1e-6))
    y = b.op(SLN, total, s2, **({"axis": -1, "epsilon": 1e-6} | norm_attrs))
    b.output(y, *([b.op("Add", total, y)] if sum_used_again else []))
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b, total


def test_gemma_residual_becomes_skip_norm_with_the_sum_as_output_3() -> None:
    b, _ = _block()
    assert FuseResidualRmsNorm().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph block(
          %0:f32[seq,8]  # residual
          %1:f32[seq,8]  # h
        ) {
          %4:f32[seq,8] = SimplifiedLayerNormalization(%1, %2, axis=-1, epsilon=1e-06)  # SimplifiedLayerNormalization
          %8:f32[seq,8], None, None, %6:f32[seq,8] = com.microsoft::SkipSimplifiedLayerNormalization(%0, %4, %3, epsilon=9.999999974752427e-07)  # SimplifiedLayerNormalization_1
          %10:f32[seq,8] = Add(%6, %8)  # Add_1
          return %8, %10
        }""")
    b.graph.check()
    assert not FuseResidualRmsNorm().run(b.graph, REGISTRY)  # settled


def test_an_unused_sum_is_not_written() -> None:
    b, total = _block(sum_used_again=False)
    assert FuseResidualRmsNorm().run(b.graph, REGISTRY)
    (fused,) = b.graph.nodes_of("SkipSimplifiedLayerNormalization", "com.microsoft")
    assert len(fused.outputs) == 1
    assert total.id not in {t.id for t in b.graph.tensors}


def test_opset_23_rms_normalization_fuses_too() -> None:
    b = GraphBuilder("rms", {"": 23})
    x, r = (b.input(n, DataType.FLOAT, [2, 8]) for n in ("x", "r"))
    b.output(b.op("RMSNormalization", b.op("Add", x, r), b.initializer("s", np.ones(8, np.float32))))
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert FuseResidualRmsNorm().run(b.graph, REGISTRY)
    (fused,) = b.graph.nodes_of("SkipSimplifiedLayerNormalization", "com.microsoft")
    assert fused.attributes == {"epsilon": float(np.float32(1e-5))}  # the spec default, not Skip*'s 1e-12


def _cast_block() -> GraphBuilder:
    """The float16 exports: Add in f16, Cast to f32, norm in f32."""
    b = GraphBuilder("f16")
    x, r = (b.input(n, DataType.FLOAT16, [2, 8]) for n in ("x", "r"))
    total = b.op("Cast", b.op("Add", x, r), to=int(TensorProto.FLOAT))
    b.output(b.op(SLN, total, b.initializer("s", np.ones(8, np.float32)), axis=-1))
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b


def _f16_scale_block() -> GraphBuilder:
    b = GraphBuilder("mixed")
    x, r = (b.input(n, DataType.FLOAT, [2, 8]) for n in ("x", "r"))
    b.output(b.op(SLN, b.op("Add", x, r), b.initializer("s", np.ones(8, np.float16)), axis=-1))
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b


def _both_broadcast_block() -> GraphBuilder:
    b = GraphBuilder("outer")
    x, r = b.input("x", DataType.FLOAT, [2, 1]), b.input("r", DataType.FLOAT, [1, 8])
    b.output(b.op(SLN, b.op("Add", x, r), b.initializer("s", np.ones(8, np.float32)), axis=-1))
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b


@pytest.mark.parametrize(
    ("build", "reason"),
    [
        (lambda: _block(axis=0)[0], "axis 0 is not the last axis"),
        (_cast_block, "through a Cast"),
        (_f16_scale_block, "sum is f32 and scale f16"),
        (_both_broadcast_block, "broadcasts an operand"),
    ],
    ids=["axis", "float16-casts", "scale-dtype", "outer-broadcast"],
)
def test_declines_with_a_reason(
    build: Callable[[], GraphBuilder], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    b = build()
    before = str(b.graph)
    with caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite"):
        assert not FuseResidualRmsNorm().run(b.graph, REGISTRY)
    assert str(b.graph) == before
    assert reason in caplog.text


def _model(skip_dims: list, *, sum_output: bool) -> onnx.ModelProto:
    nodes = [
        helper.make_node(SLN, ["h", "s1"], ["n1"], axis=-1, epsilon=1e-6),
        helper.make_node("Add", ["residual", "n1"], ["sum"]),
        helper.make_node(SLN, ["sum", "s2"], ["y"], axis=-1, epsilon=1e-6),
    ]
    outputs = ["y"]
    if sum_output:
        nodes.append(helper.make_node("Mul", ["sum", "y"], ["next"]))
        outputs.append("next")
    inputs = [
        helper.make_tensor_value_info("residual", TensorProto.FLOAT, [1, "seq", 64]),
        helper.make_tensor_value_info("h", TensorProto.FLOAT, skip_dims),
    ]
    inits = [numpy_helper.from_array(RNG.standard_normal(64).astype(np.float32), n) for n in ("s1", "s2")]
    graph = helper.make_graph(nodes, "block", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("sum_output", [True, False], ids=["sum-used", "sum-unused"])
@pytest.mark.parametrize("skip_dims", [[1, "seq", 64], ["seq", 64]], ids=["same-shape", "suffix-skip"])
def test_outputs_unchanged(skip_dims: list, sum_output: bool) -> None:
    model = _model(skip_dims, sum_output=sum_output)
    ops = [op.op_type for op in compile_model(model, {"seq": 5}).operations]
    # with the block's norm before the Add, FuseNormAddNorm then takes that norm in too (same numerics)
    assert "Add" not in ops and ops.count("SkipSimplifiedLayerNormalization") + ops.count("NormAddNorm") == 1
    feeds = {
        "residual": RNG.standard_normal((1, 5, 64)).astype(np.float32),
        "h": RNG.standard_normal([5 if d == "seq" else d for d in skip_dims]).astype(np.float32),
    }
    check_model(model, feeds, dims={"seq": 5})
