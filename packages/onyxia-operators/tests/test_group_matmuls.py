"""GroupMatMuls: the q/k/v products of one activation as one group node (MatMul and MatMulNBits): golden
graphs, the declined cases (graph unchanged, False), and outputs equal to onnxruntime's and, bit for bit,
to the plan without the pass (decode and prefill kernels of one symbolic plan)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model, ops_of, plan_without
from onnx import helper
from oracle import compile_model
from test_matmulnbits_ort import F32_TOLERANCE, INT8_TOLERANCE, quantized_weights

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph, TensorDef
from onyxia.onnx import to_onnx
from onyxia.operators import core_operator_registry
from onyxia.operators.elementwise.numpy_math import gelu
from onyxia.operators.passes import GroupMatMuls

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(11)
MS = "com.microsoft"


def _run(graph: IrGraph) -> bool:
    ShapeInferencePass().run(graph, REGISTRY)
    return GroupMatMuls().run(graph, REGISTRY)


def _weight(b: GraphBuilder, name: str, k: int, n: int) -> TensorDef:
    return b.initializer(name, RNG.standard_normal((k, n)).astype(np.float32))


def test_qkv_matmuls_become_one_group() -> None:
    b = GraphBuilder("qkv")
    x = b.input("x", DataType.FLOAT, ["batch", "seq", 8])
    q = b.op("MatMul", x, _weight(b, "wq", 8, 16), _name="q_proj")
    k = b.op("MatMul", x, _weight(b, "wk", 8, 4), _name="k_proj")
    v = b.op("MatMul", x, _weight(b, "wv", 8, 4), _name="v_proj")
    b.output(b.op("Relu", q), k, v)
    assert _run(b.graph)
    assert str(b.graph) == textwrap.dedent("""\
        graph qkv(
          %0:f32[batch,seq,8]  # x
        ) {
          %2:f32[batch,seq,16], %5:f32[batch,seq,4], %8:f32[batch,seq,4] = com.onyxia::MatMulGroup(%0, %1, %4, %7)  # q_proj
          %10:f32[batch,seq,16] = Relu(%2)  # Relu
          return %10, %5, %8
        }""")
    b.graph.check()
    assert not GroupMatMuls().run(b.graph, REGISTRY)  # settled
    assert any(o.domain == "com.onyxia" for o in to_onnx(b.graph).opset_import)


def _nbits(b: GraphBuilder, x: TensorDef, name: str, n: int, block_size: int = 16, **attrs: Any) -> TensorDef:
    weights = quantized_weights(32, n, block_size, "none", np.float32, seed=n)
    bw, scales = b.initializer(f"{name}_B", weights["B"]), b.initializer(f"{name}_scales", weights["scales"])
    attrs = {"K": 32, "N": n, "bits": 4, "block_size": block_size, "accuracy_level": 4, **attrs}
    return b.op("MatMulNBits", x, bw, scales, _domain=MS, _name=name, **attrs)


def test_matmul_nbits_siblings_become_one_group() -> None:
    b = GraphBuilder("qkv_q4")
    x = b.input("x", DataType.FLOAT, ["seq", 32])
    b.output(_nbits(b, x, "q_proj", 16), _nbits(b, x, "k_proj", 8))
    assert _run(b.graph)
    assert str(b.graph) == textwrap.dedent("""\
        graph qkv_q4(
          %0:f32[seq,32]  # x
        ) {
          %3:f32[seq,16], %7:f32[seq,8] = com.onyxia::MatMulNBitsGroup(%0, %1, %2, None, None, %5, %6, K=32, N=[16, 8], accuracy_level=4, bits=4, block_size=16)  # q_proj
          return %3, %7
        }""")
    b.graph.check()


def test_more_siblings_than_slots_form_several_groups() -> None:
    b = GraphBuilder("wide")
    x = b.input("x", DataType.FLOAT, ["seq", 8])
    b.output(*(b.op("MatMul", x, _weight(b, f"w{i}", 8, 4 + i)) for i in range(6)))
    assert _run(b.graph)
    groups = [len(n.outputs) for n in b.graph]
    assert groups == [4, 2]
    b.graph.check()


def _declined_batched_weight(b: GraphBuilder, x: TensorDef) -> None:
    b.output(b.op("MatMul", x, _weight(b, "w0", 8, 4)))
    b.output(b.op("MatMul", x, b.initializer("w1", np.ones((2, 8, 4), np.float32))))


def _declined_nbits_block_sizes(b: GraphBuilder, x: TensorDef) -> None:
    b.output(_nbits(b, x, "a", 8, 16), _nbits(b, x, "b", 8, 32))


def _declined_weight_computed_later(b: GraphBuilder, x: TensorDef) -> None:
    w = b.input("w", DataType.FLOAT, [8, 4])
    b.output(b.op("MatMul", x, _weight(b, "w0", 8, 4)))
    b.output(b.op("MatMul", x, b.op("Relu", w)))  # the Relu sits after the first MatMul


def _declined_runtime_nbits_weight(b: GraphBuilder, x: TensorDef) -> None:
    weights = quantized_weights(32, 8, 16, "none", np.float32)
    bw = b.input("B", DataType.UINT8, list(weights["B"].shape))
    scales = b.initializer("scales", weights["scales"])
    attrs: dict[str, Any] = {"K": 32, "N": 8, "bits": 4, "block_size": 16}
    b.output(_nbits(b, x, "a", 8), b.op("MatMulNBits", x, bw, scales, _domain=MS, **attrs))


@pytest.mark.parametrize(
    "build",
    [
        _declined_batched_weight,
        _declined_nbits_block_sizes,
        _declined_weight_computed_later,
        _declined_runtime_nbits_weight,
    ],
    ids=["batched-weight", "nbits-block-sizes", "weight-computed-later", "runtime-nbits-weight"],
)
def test_declines(build: Callable[[GraphBuilder, TensorDef], None]) -> None:
    b = GraphBuilder("declined")
    k = 32 if "nbits" in build.__name__ else 8
    build(b, b.input("x", DataType.FLOAT, ["seq", k]))
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not GroupMatMuls().run(b.graph, REGISTRY)
    assert str(b.graph) == before


# ----- numerics ----------------------------------------------------------------------------------
def _check(
    model: onnx.ModelProto, feeds_list: list[dict[str, np.ndarray]], tolerance: tuple[float, float] | None = None
) -> None:
    check_fused(model, feeds_list, {"GroupMatMuls"}, tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_matmul_group_outputs(dtype: type[np.floating[Any]]) -> None:
    k, ns = 40, (64, 20, 20)
    weights = {f"w{i}": RNG.standard_normal((k, n)).astype(dtype) for i, n in enumerate(ns)}
    nodes = [helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"]) for i in range(len(ns))]
    model = graph_model(nodes, {"x": (dtype, ["batch", "seq", k])}, weights, [f"y{i}" for i in range(len(ns))])
    assert ops_of(compile_model(model)) == ["MatMulGroup"]
    assert ops_of(plan_without(model, {"GroupMatMuls"})) == ["MatMul"] * 3
    tolerance = None if dtype == np.float32 else (1e-2, 5e-2)  # onnxruntime's f16 MatMul sums in another order
    _check(model, [{"x": RNG.standard_normal((1, s, k)).astype(dtype)} for s in (1, 21, 1)], tolerance)


@pytest.mark.parametrize("level", [0, 4])
@pytest.mark.parametrize(
    ("zero_points", "bias", "ops"),
    [
        ("none", False, ["MatMulNBitsGroup"]),
        ("float", False, ["MatMulNBitsGroup"]),
        ("packed", True, ["MatMulNBitsGroup", "MatMulNBits"]),  # 3 weights would bind 17 buffers (MAX_BINDINGS 16)
    ],
)
def test_matmul_nbits_group_outputs(level: int, zero_points: str, bias: bool, ops: list[str]) -> None:
    k, ns, block_size = 80, (48, 16, 16), 32  # K % block_size != 0: a padded last block
    initializers: dict[str, np.ndarray] = {}
    nodes: list[onnx.NodeProto] = []
    for i, n in enumerate(ns):
        weights = quantized_weights(k, n, block_size, zero_points, np.float32, seed=i)
        names = [f"B{i}", f"scales{i}", f"zp{i}" if zero_points != "none" else "", f"bias{i}" if bias else ""]
        initializers |= {f"B{i}": weights["B"], f"scales{i}": weights["scales"]}
        if zero_points != "none":
            initializers[f"zp{i}"] = weights["zero_points"]
        if bias:
            initializers[f"bias{i}"] = RNG.standard_normal(n).astype(np.float32)
        attrs: dict[str, Any] = {"K": k, "N": n, "bits": 4, "block_size": block_size, "accuracy_level": level}
        node_inputs = ["x", *names[:3], *(["", names[3]] if bias else [])]
        nodes.append(helper.make_node("MatMulNBits", node_inputs, [f"y{i}"], domain=MS, **attrs))
    model = graph_model(nodes, {"x": (np.float32, ["seq", k])}, initializers, [f"y{i}" for i in range(len(ns))])
    assert ops_of(compile_model(model)) == ops
    int8 = level == 4 and zero_points != "float"
    _check(
        model,
        [{"x": RNG.standard_normal((m, k)).astype(np.float32)} for m in (1, 37, 1)],
        INT8_TOLERANCE if int8 else F32_TOLERANCE,
    )


def test_constant_groups_fold() -> None:
    """Folding (all inputs known) computes what the separate ops fold to."""
    b = GraphBuilder("folded", opsets={"": 21, "com.onyxia": 1})
    x = b.constant(RNG.standard_normal((3, 8)).astype(np.float32))
    w = [b.constant(RNG.standard_normal((8, n)).astype(np.float32)) for n in (4, 4)]
    group = b.op("MatMulGroup", x, *w, _domain="com.onyxia", _outputs=2)
    gated = b.op("GatedMatMul", x, *w, _domain="com.onyxia", approximate="tanh")
    b.output(*group, gated)
    ShapeInferencePass().run(b.graph, REGISTRY)
    xv, wv = _folded(b.graph, x), [_folded(b.graph, t) for t in w]
    products = [xv @ v for v in wv]
    for t, expected in zip(group, products):
        np.testing.assert_allclose(_folded(b.graph, t), expected, rtol=1e-6)
    expected_gated = gelu(products[0], "tanh").astype(np.float32) * products[1]
    np.testing.assert_allclose(_folded(b.graph, gated), expected_gated, rtol=1e-6)


def _folded(graph: IrGraph, tensor: TensorDef) -> np.ndarray:
    value = graph.tensor(tensor).value
    assert value is not None, f"tensor '{tensor.name}': expected a folded value, found none"
    return value
