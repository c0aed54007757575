"""FuseMlpGate with SiLU: the gate/up group feeding ``Mul(Mul(g, Sigmoid(g)), u)`` (the MLP of Llama, Qwen2/3,
Mistral and Phi-3, from onnxruntime-genai's builder and optimum alike) as one gated product, MatMul and 4-bit
MatMulNBits: golden graphs for every operand order, declined cases with their reasons (graph unchanged), and
outputs equal to onnxruntime's and, bit for bit, to the plan without the fusion (f16 included)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import compile_model
from test_matmulnbits_ort import F32_TOLERANCE, INT8_TOLERANCE, quantized_weights

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph
from onyxia.core.rewrite import Decline
from onyxia.core.rewrite.engine import try_rule
from onyxia.operators import core_operator_registry
from onyxia.operators.matmul.fusions import FUSE_SILU_GATE
from onyxia.operators.passes import FuseMlpGate, GroupMatMuls

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(13)
MS = "com.microsoft"


def _mlp(*, inner_swapped: bool = False, outer_swapped: bool = False, extra: str = "") -> GraphBuilder:
    """x -> gate/up MatMuls -> Mul(Mul(g, Sigmoid(g)), u); `extra` names an intermediate also returned."""
    b = GraphBuilder("silu_mlp")
    x = b.input("x", DataType.FLOAT, ["seq", 8])
    w_gate, w_up = (b.initializer(n, RNG.standard_normal((8, 12)).astype(np.float32)) for n in ("w_gate", "w_up"))
    gate = b.op("MatMul", x, w_gate, _name="gate_proj")
    up = b.op("MatMul", x, w_up, _name="up_proj")
    sig = b.op("Sigmoid", gate, _name="act_fn/Sigmoid")
    silu = b.op("Mul", *((sig, gate) if inner_swapped else (gate, sig)), _name="act_fn/Mul")
    b.output(b.op("Mul", *((up, silu) if outer_swapped else (silu, up)), _name="mlp/Mul"))
    if extra:
        b.output(b.op("Relu", {"gate": gate, "sigmoid": sig, "silu": silu}[extra]))
    return b


def _grouped(graph: IrGraph) -> IrGraph:
    ShapeInferencePass().run(graph, REGISTRY)
    assert GroupMatMuls().run(graph, REGISTRY)
    return graph


@pytest.mark.parametrize("inner_swapped", [False, True], ids=["g-sigmoid", "sigmoid-g"])
@pytest.mark.parametrize("outer_swapped", [False, True], ids=["silu-up", "up-silu"])
def test_silu_gate_and_up_become_one_gated_product(inner_swapped: bool, outer_swapped: bool) -> None:
    b = _mlp(inner_swapped=inner_swapped, outer_swapped=outer_swapped)
    graph = _grouped(b.graph)
    assert FuseMlpGate().run(graph, REGISTRY)
    assert str(graph) == textwrap.dedent("""\
        graph silu_mlp(
          %0:f32[seq,8]  # x
        ) {
          %11:f32[seq,12] = com.onyxia::GatedMatMul(%0, %1, %2, activation='silu')  # mlp/Mul
          return %11
        }""")
    graph.check()
    assert not FuseMlpGate().run(graph, REGISTRY)  # settled


@pytest.mark.parametrize(
    ("extra", "culprit"), [("gate", "gate_proj"), ("sigmoid", "act_fn/Sigmoid"), ("silu", "act_fn/Mul")]
)
def test_declines_when_an_intermediate_has_another_use(extra: str, culprit: str) -> None:
    graph = _grouped(_mlp(extra=extra).graph)
    before = str(graph)
    anchor = next(n for n in graph.nodes if n.name == "mlp/Mul")
    decline = try_rule(FUSE_SILU_GATE, graph, anchor, REGISTRY)
    assert isinstance(decline, Decline)
    assert decline.reason == f"'{culprit}' ({decline.culprit.op_type}) has a use outside the gated MLP"
    assert not FuseMlpGate().run(graph, REGISTRY)
    assert str(graph) == before


def test_declines_silu_of_the_up_product() -> None:
    """Mul(Mul(u, Sigmoid(u)), u): the activation reads the product the Mul multiplies by, not the other one."""
    b = GraphBuilder("same")
    x = b.input("x", DataType.FLOAT, ["seq", 8])
    w = [b.initializer(f"w{i}", RNG.standard_normal((8, 12)).astype(np.float32)) for i in range(2)]
    u, other = b.op("MatMul", x, w[0]), b.op("MatMul", x, w[1])
    b.output(b.op("Mul", b.op("Mul", u, b.op("Sigmoid", u)), u), other)
    graph = _grouped(b.graph)
    before = str(graph)
    assert not FuseMlpGate().run(graph, REGISTRY)
    assert str(graph) == before


# ----- numerics ----------------------------------------------------------------------------------
def _silu_nodes(gate_node: object, up_node: object) -> list:
    """The onnxruntime-genai builder's spelling (optimum's differs only in names)."""
    return [
        gate_node,
        up_node,
        helper.make_node("Sigmoid", ["gate"], ["sig"]),
        helper.make_node("Mul", ["gate", "sig"], ["silu"]),
        helper.make_node("Mul", ["silu", "up"], ["y"]),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_silu_gated_matmul_outputs(dtype: type) -> None:
    k, n = 48, 40
    weights = {w: (RNG.standard_normal((k, n)) * 0.3).astype(dtype) for w in ("w_gate", "w_up")}
    gate = helper.make_node("MatMul", ["x", "w_gate"], ["gate"])
    up = helper.make_node("MatMul", ["x", "w_up"], ["up"])
    model = graph_model(_silu_nodes(gate, up), {"x": (dtype, ["seq", k])}, weights, ["y"])
    assert ops_of(compile_model(model)) == ["GatedMatMul"]
    tolerance = None if dtype == np.float32 else (1e-2, 5e-2)  # onnxruntime's f16 MatMul sums in another order
    feeds = [{"x": RNG.standard_normal((m, k)).astype(dtype)} for m in (1, 19, 1)]
    check_fused(model, feeds, {"FuseMlpGate"}, tolerance)


@pytest.mark.parametrize(("level", "dtype"), [(0, np.float32), (4, np.float32), (4, np.float16)])
def test_silu_gated_matmul_nbits_outputs(level: int, dtype: type) -> None:
    k, n, block_size = 64, 72, 32
    initializers, projections = {}, []
    for name in ("gate", "up"):
        weights = quantized_weights(k, n, block_size, "packed", dtype, seed=len(name) + 3)
        initializers |= {f"{name}_{key}": value for key, value in weights.items()}
        inputs = ["x", f"{name}_B", f"{name}_scales", f"{name}_zero_points"]
        attrs = {"K": k, "N": n, "bits": 4, "block_size": block_size, "accuracy_level": level}
        projections.append(helper.make_node("MatMulNBits", inputs, [name], domain=MS, **attrs))
    model = graph_model(_silu_nodes(*projections), {"x": (dtype, ["seq", k])}, initializers, ["y"])
    assert ops_of(compile_model(model)) == ["GatedMatMulNBits"]
    feeds = [{"x": RNG.standard_normal((m, k)).astype(dtype)} for m in (1, 37, 1)]
    tolerance = (INT8_TOLERANCE if level == 4 else F32_TOLERANCE) if dtype == np.float32 else None
    check_fused(model, feeds, {"FuseMlpGate"}, tolerance)
