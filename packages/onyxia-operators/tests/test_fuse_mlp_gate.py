"""FuseMlpGate: a gate/up group feeding Mul(Gelu(gate), up) as one gated product (MatMul and MatMulNBits):
golden graphs, declined cases (graph unchanged, False), and outputs equal to onnxruntime's and, bit for
bit, to the plan without the fusion."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import compile_model
from test_matmulnbits_ort import F32_TOLERANCE, INT8_TOLERANCE, quantized_weights

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph, TensorDef
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseMlpGate, GroupMatMuls

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(12)
MS = "com.microsoft"


def _mlp(*, up_elsewhere: bool = False, swapped: bool = False) -> tuple[GraphBuilder, TensorDef]:
    b = GraphBuilder("mlp")
    x = b.input("x", DataType.FLOAT, ["seq", 8])
    weights = [b.initializer(n, RNG.standard_normal((8, 12)).astype(np.float32)) for n in ("w_up", "w_gate")]
    up = b.op("MatMul", x, weights[0], _name="up_proj")  # up first: the gate is the group's second output
    gate = b.op("MatMul", x, weights[1], _name="gate_proj")
    act = b.op("Gelu", gate, approximate="tanh")
    b.output(b.op("Mul", *((up, act) if swapped else (act, up)), _name="mlp_mul"))
    if up_elsewhere:
        b.output(b.op("Relu", up))
    return b, up


def _run(graph: IrGraph) -> bool:
    ShapeInferencePass().run(graph, REGISTRY)
    assert GroupMatMuls().run(graph, REGISTRY)
    return FuseMlpGate().run(graph, REGISTRY)


@pytest.mark.parametrize("swapped", [False, True], ids=["gelu-first", "up-first"])
def test_gate_and_up_become_one_gated_product(swapped: bool) -> None:
    b, _ = _mlp(swapped=swapped)
    assert _run(b.graph)
    assert str(b.graph) == textwrap.dedent("""\
        graph mlp(
          %0:f32[seq,8]  # x
        ) {
          %9:f32[seq,12] = com.onyxia::GatedMatMul(%0, %2, %1, approximate='tanh')  # mlp_mul
          return %9
        }""")
    b.graph.check()
    assert not FuseMlpGate().run(b.graph, REGISTRY)  # settled


def test_declines_when_up_has_another_use() -> None:
    b, _ = _mlp(up_elsewhere=True)
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert GroupMatMuls().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not FuseMlpGate().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_declines_a_mul_by_another_tensor() -> None:
    b = GraphBuilder("other_mul")
    x = b.input("x", DataType.FLOAT, ["seq", 8])
    w = [b.initializer(f"w{i}", RNG.standard_normal((8, 12)).astype(np.float32)) for i in range(2)]
    gate, up = b.op("MatMul", x, w[0]), b.op("MatMul", x, w[1])
    b.output(b.op("Mul", b.op("Gelu", gate), b.input("other", DataType.FLOAT, ["seq", 12])), up)
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert GroupMatMuls().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not FuseMlpGate().run(b.graph, REGISTRY)
    assert str(b.graph) == before


# ----- numerics ----------------------------------------------------------------------------------
def _mlp_nodes(gate_node: object, up_node: object, approximate: str) -> list:
    return [
        up_node,
        gate_node,
        helper.make_node("Gelu", ["gate"], ["act"], approximate=approximate),
        helper.make_node("Mul", ["up", "act"], ["y"]),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gated_matmul_outputs(dtype: type, approximate: str) -> None:
    k, n = 48, 40
    weights = {w: (RNG.standard_normal((k, n)) * 0.3).astype(dtype) for w in ("w_gate", "w_up")}
    gate = helper.make_node("MatMul", ["x", "w_gate"], ["gate"])
    up = helper.make_node("MatMul", ["x", "w_up"], ["up"])
    model = graph_model(_mlp_nodes(gate, up, approximate), {"x": (dtype, ["seq", k])}, weights, ["y"])
    assert ops_of(compile_model(model)) == ["GatedMatMul"]
    tolerance = None if dtype == np.float32 else (1e-2, 5e-2)  # onnxruntime's f16 MatMul sums in another order
    feeds = [{"x": RNG.standard_normal((m, k)).astype(dtype)} for m in (1, 19, 1)]
    check_fused(model, feeds, {"FuseMlpGate"}, tolerance)


@pytest.mark.parametrize(("level", "dtype"), [(0, np.float32), (4, np.float32), (4, np.float16)])
def test_gated_matmul_nbits_outputs(level: int, dtype: type) -> None:
    k, n, block_size = 64, 72, 32
    initializers, projections = {}, []
    for name in ("gate", "up"):
        weights = quantized_weights(k, n, block_size, "packed", dtype, seed=len(name))
        initializers |= {f"{name}_{key}": value for key, value in weights.items()}
        inputs = ["x", f"{name}_B", f"{name}_scales", f"{name}_zero_points"]
        attrs = {"K": k, "N": n, "bits": 4, "block_size": block_size, "accuracy_level": level}
        projections.append(helper.make_node("MatMulNBits", inputs, [name], domain=MS, **attrs))
    model = graph_model(_mlp_nodes(*projections, "tanh"), {"x": (dtype, ["seq", k])}, initializers, ["y"])
    assert ops_of(compile_model(model)) == ["GatedMatMulNBits"]
    feeds = [{"x": RNG.standard_normal((m, k)).astype(dtype)} for m in (1, 37, 1)]
    tolerance = (INT8_TOLERANCE if level == 4 else F32_TOLERANCE) if dtype == np.float32 else None
    check_fused(model, feeds, {"FuseMlpGate"}, tolerance)
