"""FuseMatMulBias: a projection's constant bias Add folded into its product (Qwen2's q/k/v biases): MatMul into a
biased MatMulGroup (grouped afterwards with its biased siblings), MatMulNBits into its native bias input. Golden
graphs, declined cases with their reasons (graph unchanged), and outputs equal to onnxruntime's and, bit for bit,
to the plan without the pass."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import compile_model
from test_matmulnbits_ort import F32_TOLERANCE, INT8_TOLERANCE, quantized_weights

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder
from onyxia.core.rewrite import Decline
from onyxia.core.rewrite.engine import try_rule
from onyxia.operators import core_operator_registry
from onyxia.operators.matmul.bias_fusions import FOLD_ADD_INTO_MATMUL
from onyxia.operators.passes import FuseMatMulBias, GroupMatMuls
from onyxia.operators.quantized.fusions import FOLD_ADD_INTO_MATMUL_NBITS

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(14)
MS = "com.microsoft"


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_genai_qkv_bias_becomes_a_biased_group_of_one() -> None:
    b = GraphBuilder("qkv_bias")
    x = b.input("x", DataType.FLOAT, ["batch", "seq", 8])
    qkv = b.op("MatMul", x, b.initializer("w_qkv", _f32(8, 24)), _name="qkv_proj/MatMul")
    b.output(b.op("Add", qkv, b.initializer("b_qkv", _f32(24)), _name="qkv_proj/Add"))
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert FuseMatMulBias().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph qkv_bias(
          %0:f32[batch,seq,8]  # x
        ) {
          %5:f32[batch,seq,24] = com.onyxia::MatMulGroup(%0, %1, %4, bias=1)  # qkv_proj/Add
          return %5
        }""")
    b.graph.check()
    assert not GroupMatMuls().run(b.graph, REGISTRY)  # nothing to group with


def test_optimum_q_k_v_biases_become_one_biased_group() -> None:
    b = GraphBuilder("q_k_v_bias")
    x = b.input("x", DataType.FLOAT, ["batch", "seq", 8])
    outputs = []
    for name, n in (("q", 16), ("k", 4), ("v", 4)):
        product = b.op("MatMul", x, b.initializer(f"w_{name}", _f32(8, n)), _name=f"{name}_proj/MatMul")
        bias = b.initializer(f"b_{name}", _f32(n))
        outputs.append(b.op("Add", bias, product, _name=f"{name}_proj/Add"))  # optimum: the bias first
    b.output(*outputs)
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert FuseMatMulBias().run(b.graph, REGISTRY)
    assert GroupMatMuls().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph q_k_v_bias(
          %0:f32[batch,seq,8]  # x
        ) {
          %5:f32[batch,seq,16], %11:f32[batch,seq,4], %17:f32[batch,seq,4] = com.onyxia::MatMulGroup(%0, %1, %7, %13, %4, %10, %16, bias=1)  # q_proj/Add
          return %5, %11, %17
        }""")
    b.graph.check()


def test_declines_a_bias_broadcast_of_another_shape() -> None:
    b = GraphBuilder("broadcast")
    x = b.input("x", DataType.FLOAT, ["seq", 8])
    product = b.op("MatMul", x, b.initializer("w", _f32(8, 4)))
    b.output(b.op("Add", product, b.initializer("b", _f32(1, 4)), _name="add"))
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    add = next(n for n in b.graph.nodes if n.name == "add")
    decline = try_rule(FOLD_ADD_INTO_MATMUL, b.graph, add, REGISTRY)
    assert isinstance(decline, Decline)
    assert decline.reason == "bias 'b' is float[1, 4]; expected float[4]"
    assert not FuseMatMulBias().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_declines_a_weight_known_only_at_run_time_of_unknown_shape() -> None:
    b = GraphBuilder("runtime_weight")
    x = b.input("x", DataType.FLOAT, ["seq", 8])
    product = b.op("MatMul", x, b.input("w", DataType.FLOAT, [8, "n"]))
    b.output(b.op("Add", product, b.initializer("b", _f32(4)), _name="add"))
    ShapeInferencePass().run(b.graph, REGISTRY)
    add = next(n for n in b.graph.nodes if n.name == "add")
    decline = try_rule(FOLD_ADD_INTO_MATMUL, b.graph, add, REGISTRY)
    assert isinstance(decline, Decline)
    assert decline.reason == "the MatMul's weight is not a static [K, N] one binding holds"


def _nbits_bias_model(dtype: type, level: int, *, packed: bool = True) -> tuple:
    k, n, block_size = 64, 40, 32
    weights = quantized_weights(k, n, block_size, "packed" if packed else "none", dtype, seed=5)
    initializers = {f"w_{key}": value for key, value in weights.items()}
    initializers["bias"] = (RNG.standard_normal(n) * 0.5).astype(dtype)
    inputs = ["x", "w_B", "w_scales", *(["w_zero_points"] if packed else [])]
    attrs = {"K": k, "N": n, "bits": 4, "block_size": block_size, "accuracy_level": level}
    nodes = [
        helper.make_node("MatMulNBits", inputs, ["product"], domain=MS, **attrs),
        helper.make_node("Add", ["product", "bias"], ["y"]),
    ]
    return graph_model(nodes, {"x": (dtype, ["seq", k])}, initializers, ["y"]), k


def test_matmul_nbits_bias_becomes_its_bias_input() -> None:
    b = GraphBuilder("nbits_bias")
    x = b.input("x", DataType.FLOAT, ["seq", 64])
    weights = quantized_weights(64, 40, 32, "none", np.float32, seed=6)
    w = [b.initializer(f"w_{key}", value) for key, value in weights.items()]
    product = b.op("MatMulNBits", x, *w, _domain=MS, K=64, N=40, bits=4, block_size=32, _name="qkv_proj/MatMul_Q4")
    b.output(b.op("Add", product, b.initializer("bias", _f32(40)), _name="qkv_proj/Add"))
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert FuseMatMulBias().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph nbits_bias(
          %0:f32[seq,64]  # x
        ) {
          %6:f32[seq,40] = com.microsoft::MatMulNBits(%0, %1, %2, None, None, %5, K=64, N=40, bits=4, block_size=32)  # qkv_proj/Add
          return %6
        }""")
    b.graph.check()


def test_declines_an_f16_matmul_nbits_bias() -> None:
    b = GraphBuilder("nbits_f16")
    x = b.input("x", DataType.FLOAT16, ["seq", 64])
    weights = quantized_weights(64, 40, 32, "none", np.float16, seed=6)
    w = [b.initializer(f"w_{key}", value) for key, value in weights.items()]
    product = b.op("MatMulNBits", x, *w, _domain=MS, K=64, N=40, bits=4, block_size=32)
    b.output(b.op("Add", product, b.initializer("bias", _f32(40).astype(np.float16)), _name="add"))
    ShapeInferencePass().run(b.graph, REGISTRY)
    add = next(n for n in b.graph.nodes if n.name == "add")
    decline = try_rule(FOLD_ADD_INTO_MATMUL_NBITS, b.graph, add, REGISTRY)
    assert isinstance(decline, Decline)
    assert decline.reason.startswith("f16: MatMulNBits' bias input rounds once")


# ----- numerics ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_biased_group_outputs(dtype: type) -> None:
    k, nodes, weights = 48, [], {}
    for name, n in (("q", 32), ("k", 8), ("v", 8)):
        weights |= {f"w_{name}": (RNG.standard_normal((k, n)) * 0.3).astype(dtype)}
        weights |= {f"b_{name}": RNG.standard_normal(n).astype(dtype)}
        nodes += [
            helper.make_node("MatMul", ["x", f"w_{name}"], [f"p_{name}"]),
            helper.make_node("Add", [f"b_{name}", f"p_{name}"], [name]),
        ]
    model = graph_model(nodes, {"x": (dtype, ["batch", "seq", k])}, weights, ["q", "k", "v"])
    assert ops_of(compile_model(model)) == ["MatMulGroup"]
    tolerance = None if dtype == np.float32 else (1e-2, 5e-2)  # onnxruntime's f16 MatMul sums in another order
    feeds = [{"x": RNG.standard_normal((1, m, k)).astype(dtype)} for m in (1, 19, 1)]
    check_fused(model, feeds, {"FuseMatMulBias"}, tolerance)


@pytest.mark.parametrize(("level", "packed"), [(0, True), (4, True), (4, False)])
def test_matmul_nbits_bias_outputs(level: int, packed: bool) -> None:
    model, k = _nbits_bias_model(np.float32, level, packed=packed)
    assert ops_of(compile_model(model)) == ["MatMulNBits"]
    feeds = [{"x": RNG.standard_normal((m, k)).astype(np.float32)} for m in (1, 37, 1)]
    check_fused(model, feeds, {"FuseMatMulBias"}, INT8_TOLERANCE if level == 4 else F32_TOLERANCE)
