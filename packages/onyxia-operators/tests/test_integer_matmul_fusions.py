"""quantize_dynamic's products as few dispatches: com.microsoft DynamicQuantizeMatMul against onnxruntime bit for
bit (weights int8/uint8, per-tensor and per-column scales and zero points, bias, constant and run-time B, a row
that reduces A in every workgroup, rows that take the parameter dispatch, both in one symbolic plan, K over a
tile), the fusions that make it and its group and gated forms (golden graph, declines with reasons, the
onnx-community layer shape against onnxruntime and bit for bit against the unfused plan), folding, bad inputs."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import EXACT_ON_CPU, assert_close, check_op, compile_model, make_model, reference_outputs, runtime

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph, ShapeInferenceError, TensorDef, UnsupportedOpError
from onyxia.core.rewrite import Decline
from onyxia.core.rewrite.engine import try_rule
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseMatMulBias, FuseMlpGate, GroupMatMuls
from onyxia.operators.quantized.dynamic_quantize_matmul import self_rows
from onyxia.operators.quantized.integer_fusions import (
    FUSE_DYNAMIC_QUANTIZE_INTO_MATMUL_INTEGER_TO_FLOAT,
    FUSE_MLP_GATE_DYNAMIC,
)

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(19)
MS = "com.microsoft"
# onnxruntime rounds sum * scale, then adds the bias: a GPU may contract the two into one fused multiply-add
EXACT = EXACT_ON_CPU
BYTES = {"u8": np.uint8, "i8": np.int8}


def _bytes(dtype: type, *shape: int) -> np.ndarray:
    """Random bytes; int8 ones in [-64, 63]. onnxruntime's uint8 x int8 kernel on AVX2 CPUs without VNNI
    (this CI machine) sums pairs of products with vpmaddubsw, which saturates at the int16 range, so its
    result is exact only while 255 * |b| * 2 stays below 32768; Onyxia's int32 sums are exact at any
    range (`test_uint8_by_int8_is_exact_over_the_full_range`)."""
    info = np.iinfo(dtype)
    low, high = (-64, 63) if dtype == np.int8 else (info.min, info.max)
    return RNG.integers(low, high + 1, shape).astype(dtype)


def _inputs(m: tuple[int, ...], k: int, n: int, b_t: type, per_column: bool, zero_point: bool, bias: bool) -> dict:
    return {
        "a": (RNG.standard_normal((*m, k)) * 3).astype(np.float32),
        "b": _bytes(b_t, k, n),
        "b_scale": RNG.uniform(1e-3, 1e-1, n if per_column else ()).astype(np.float32),
        "b_zp": (_bytes(b_t, n) if per_column else _bytes(b_t)) if zero_point else None,
        "bias": RNG.standard_normal(n).astype(np.float32) if bias else None,
    }


# (rows of A, K, N): a decode row, K and N off the 4-byte words, rows past self_rows (the parameter dispatch),
# a 3-D A, a 1-D A, K over one workgroup-memory tile (1024 words)
SHAPES = [((1,), 64, 16), ((3,), 13, 7), ((40,), 300, 70), ((2, 5), 24, 9), ((), 10, 6), ((1,), 5000, 9)]


@pytest.mark.parametrize("b_t", sorted(BYTES))
@pytest.mark.parametrize("per_column", [False, True], ids=["per_tensor", "per_column"])
@pytest.mark.parametrize("weight", [True, False], ids=["constant_b", "runtime_b"])
def test_dynamic_quantize_matmul(b_t: str, per_column: bool, weight: bool) -> None:
    for m, k, n in SHAPES:
        for zero_point, bias in ((True, True), (False, False)):
            inputs = _inputs(m, k, n, BYTES[b_t], per_column, zero_point, bias)
            initializers = ("b", "b_scale", "b_zp") if weight else ()
            check_op("DynamicQuantizeMatMul", inputs, domain=MS, initializers=initializers, tolerance=EXACT)


def test_quotients_on_halves_round_to_even() -> None:
    """Range [-1, 254]: scale exactly 1, so x / scale lands on halves (ties to even, as MLAS), the quotients
    onyxia::dynamic_quant's round_quotient leaves to the correctly rounded division."""
    a = np.array([[-1.0, 0.5, 1.5, 2.5, -0.5, 253.5, 254.0, 3.5]], np.float32)
    inputs = {"a": a, "b": _bytes(np.uint8, 8, 5), "b_scale": np.array(0.25, np.float32)}
    check_op("DynamicQuantizeMatMul", inputs, domain=MS, initializers=("b", "b_scale"), tolerance=EXACT)


def test_one_symbolic_plan_reduces_a_in_the_product_or_dispatches_its_parameters() -> None:
    """Rows up to self_rows(K): the product is one dispatch; more: a DynamicQuantizeLinear dispatch first (both
    steps in the plan, each given zero workgroups when the other runs); equal to onnxruntime either way."""
    k, n = 256, 40
    inputs = _inputs((1,), k, n, np.int8, True, True, True)
    model = make_model(
        "DynamicQuantizeMatMul",
        inputs,
        domain=MS,
        initializers=("b", "b_scale", "b_zp", "bias"),
        dim_params={"a": ["m", k]},
    )
    compiled = compile_model(model)
    assert [len(op.steps) for op in compiled.operations] == [2], "a parameter dispatch and the product"
    executor = runtime().load_model(compiled)
    for rows in (1, self_rows(k), self_rows(k) + 1, 33, 1):
        feeds = {"a": (RNG.standard_normal((rows, k)) * 2).astype(np.float32)}
        got = executor.run(feeds)["y0"]
        assert_close(got, reference_outputs(model, feeds, "ort")[0], f"{rows} rows", tolerance=EXACT)
        live = [op for _, op in executor.live_dispatches()]
        assert len(live) == (1 if rows <= self_rows(k) else 2), (rows, live)


def test_constant_inputs_fold_as_onnxruntime_computes() -> None:
    inputs = _inputs((3,), 20, 8, np.uint8, False, True, True)
    model = make_model("DynamicQuantizeMatMul", inputs, domain=MS, initializers=tuple(inputs))
    assert not compile_model(model).operations
    check_op("DynamicQuantizeMatMul", inputs, domain=MS, initializers=tuple(inputs), tolerance=EXACT)


# ----- the fusions: golden graph, declines --------------------------------------------------------
def _projection(b: GraphBuilder, quantized: list[TensorDef], name: str, n: int, bias: bool = False) -> TensorDef:
    """What fuse_cast_mul_into_MatMulInteger leaves of one quantize_dynamic MatMul: MatMulIntegerToFloat."""
    q, scale, zero_point = quantized
    weight = b.initializer(f"{name}_w", _bytes(np.int8, 8, n))
    w_scale = b.initializer(f"{name}_s", np.array(0.01, np.float32))
    w_zp = b.initializer(f"{name}_z", np.array(0, np.int8))
    extra = [b.initializer(f"{name}_b", RNG.standard_normal(n).astype(np.float32))] if bias else []
    inputs = [q, weight, scale, w_scale, zero_point, w_zp, *extra]
    return b.op("MatMulIntegerToFloat", *inputs, _domain=MS, _name=f"{name}_proj")


def _layer(*, bias: bool = False, up_elsewhere: bool = False) -> GraphBuilder:
    """q/k/v of one quantized x, and a Gelu-gated MLP of another."""
    b = GraphBuilder("layer")
    x = b.input("x", DataType.FLOAT, ["seq", 8])
    attention = list(b.op("DynamicQuantizeLinear", x, _outputs=3))
    b.output(*(_projection(b, attention, name, n) for name, n in (("q", 16), ("k", 8), ("v", 8))))
    h = b.input("h", DataType.FLOAT, ["seq", 8])
    mlp = list(b.op("DynamicQuantizeLinear", h, _outputs=3))
    gate, up = _projection(b, mlp, "gate", 12, bias), _projection(b, mlp, "up", 12, bias)
    b.output(b.op("Mul", b.op("Gelu", gate, approximate="tanh"), up, _name="mlp_mul"))
    if up_elsewhere:
        b.output(b.op("Relu", up))
    return b


def _fuse(graph: IrGraph) -> list[bool]:
    ShapeInferencePass().run(graph, REGISTRY)
    return [p.run(graph, REGISTRY) for p in (FuseMatMulBias(), GroupMatMuls(), FuseMlpGate())]


def test_layer_becomes_a_group_and_a_gated_product() -> None:
    b = _layer()
    assert _fuse(b.graph) == [True, True, True]
    assert str(b.graph) == textwrap.dedent("""\
        graph layer(
          %0:f32[seq,8]  # x
          %20:f32[seq,8]  # h
        ) {
          %8:f32[seq,16], %13:f32[seq,8], %18:f32[seq,8] = com.onyxia::DynamicQuantizeMatMulGroup(%0, %5, %6, %7, None, %10, %11, %12, None, %15, %16, %17)  # q_proj
          %37:f32[seq,12] = com.onyxia::GatedDynamicQuantizeMatMul(%20, %25, %26, %27, None, %30, %31, %32, approximate='tanh')  # mlp_mul
          return %8, %13, %18, %37
        }""")
    b.graph.check()
    assert _fuse(b.graph) == [False, False, False]  # settled


def test_declines_a_batched_weight() -> None:
    b = GraphBuilder("batched")
    q, scale, zero_point = b.op("DynamicQuantizeLinear", b.input("x", DataType.FLOAT, [3, 8]), _outputs=3)
    weight = b.initializer("w", _bytes(np.uint8, 2, 8, 4))
    s = b.initializer("s", np.array(0.5, np.float32))
    b.output(b.op("MatMulIntegerToFloat", q, weight, scale, s, zero_point, _domain=MS))
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    product = b.graph.nodes_of("MatMulIntegerToFloat", MS)[0]
    result = try_rule(FUSE_DYNAMIC_QUANTIZE_INTO_MATMUL_INTEGER_TO_FLOAT, b.graph, product, REGISTRY)
    assert isinstance(result, Decline) and "2-D B [K, N]" in result.reason, result
    assert str(b.graph) == before


def test_leaves_a_product_whose_zero_point_is_not_the_quantizers() -> None:
    """A zero point of its own (or none) is not DynamicQuantizeMatMul's: the pattern does not match."""
    b = GraphBuilder("other_zero_point")
    q, scale, _ = b.op("DynamicQuantizeLinear", b.input("x", DataType.FLOAT, [3, 8]), _outputs=3)
    weight = b.initializer("w", _bytes(np.int8, 8, 4))
    s = b.initializer("s", np.array(0.5, np.float32))
    zero_point = b.input("z", DataType.UINT8, [])
    b.output(b.op("MatMulIntegerToFloat", q, weight, scale, s, zero_point, _domain=MS))
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not FuseMatMulBias().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_runtime_weights_do_not_group() -> None:
    b = GraphBuilder("runtime_weights")
    x = b.input("x", DataType.FLOAT, ["seq", 8])
    s = b.initializer("s", np.array(0.5, np.float32))
    weights = [b.input(f"w{i}", DataType.INT8, [8, 4]) for i in range(2)]
    b.output(*(b.op("DynamicQuantizeMatMul", x, w, s, _domain=MS) for w in weights))
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not GroupMatMuls().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_gate_declines_biased_projections() -> None:
    b = _layer(bias=True)
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert FuseMatMulBias().run(b.graph, REGISTRY) and GroupMatMuls().run(b.graph, REGISTRY)
    before = str(b.graph)
    mul = next(n for n in b.graph.nodes_of("Mul") if n.name == "mlp_mul")
    result = try_rule(FUSE_MLP_GATE_DYNAMIC, b.graph, mul, REGISTRY)
    assert isinstance(result, Decline) and "bias" in result.reason, result
    assert str(b.graph) == before


def test_gate_declines_when_up_has_another_use() -> None:
    b = _layer(up_elsewhere=True)
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert FuseMatMulBias().run(b.graph, REGISTRY) and GroupMatMuls().run(b.graph, REGISTRY)
    before = str(b.graph)
    mul = next(n for n in b.graph.nodes_of("Mul") if n.name == "mlp_mul")
    result = try_rule(FUSE_MLP_GATE_DYNAMIC, b.graph, mul, REGISTRY)
    assert isinstance(result, Decline) and "use outside the gated MLP" in result.reason, result
    assert str(b.graph) == before


# ----- numerics of the onnx-community layer shape -------------------------------------------------
def _quantized_matmul(x: str, name: str, k: int, n: int, b_t: type, weights: dict) -> list:
    """quantize_dynamic's nodes for one MatMul by a constant weight (x's DynamicQuantizeLinear shared)."""
    weights |= {
        f"{name}_w": _bytes(b_t, k, n),
        f"{name}_s": np.array(RNG.uniform(1e-3, 1e-2), np.float32),
        f"{name}_z": _bytes(b_t) if b_t == np.uint8 else np.array(0, np.int8),
    }
    return [
        helper.make_node("Mul", [f"{x}_scale", f"{name}_s"], [f"{name}_scales"]),
        helper.make_node("MatMulInteger", [f"{x}_q", f"{name}_w", f"{x}_zp", f"{name}_z"], [f"{name}_acc"]),
        helper.make_node("Cast", [f"{name}_acc"], [f"{name}_f"], to=1),
        helper.make_node("Mul", [f"{name}_f", f"{name}_scales"], [name]),
    ]


def _quantize(x: str) -> object:
    return helper.make_node("DynamicQuantizeLinear", [x], [f"{x}_q", f"{x}_scale", f"{x}_zp"])


@pytest.mark.parametrize("b_t", sorted(BYTES))
def test_qkv_group_equals_onnxruntime(b_t: str) -> None:
    k, weights = 48, {}
    nodes = [_quantize("x")]
    for name, n in (("q", 64), ("k", 16), ("v", 16)):
        nodes += _quantized_matmul("x", name, k, n, BYTES[b_t], weights)
    model = graph_model(nodes, {"x": (np.float32, ["seq", k])}, weights, ["q", "k", "v"])
    assert ops_of(compile_model(model, {"seq": 1})) == ["DynamicQuantizeMatMulGroup"]
    feeds = [{"x": (RNG.standard_normal((m, k)) * 2).astype(np.float32)} for m in (1, 37, 1)]
    check_fused(model, feeds, {"FuseMatMulBias", "GroupMatMuls"}, tolerance=EXACT)


@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_gated_mlp_equals_onnxruntime(activation: str) -> None:
    k, n, weights = 40, 96, {}
    nodes = [_quantize("h"), *_quantized_matmul("h", "gate", k, n, np.int8, weights)]
    nodes += _quantized_matmul("h", "up", k, n, np.int8, weights)
    if activation == "gelu":
        nodes.append(helper.make_node("Gelu", ["gate"], ["act"], approximate="tanh"))
    else:
        nodes += [helper.make_node("Sigmoid", ["gate"], ["sig"]), helper.make_node("Mul", ["gate", "sig"], ["act"])]
    nodes.append(helper.make_node("Mul", ["act", "up"], ["y"]))
    model = graph_model(nodes, {"h": (np.float32, ["seq", k])}, weights, ["y"])
    assert ops_of(compile_model(model, {"seq": 1})) == ["GatedDynamicQuantizeMatMul"]
    feeds = [{"h": (RNG.standard_normal((m, k)) * 2).astype(np.float32)} for m in (1, 37, 1)]
    # the products are exact (test_qkv_group_equals_onnxruntime); the activations are float32 math, not onnxruntime's
    check_fused(model, feeds, {"FuseMatMulBias", "GroupMatMuls", "FuseMlpGate"})


# ----- bad inputs -------------------------------------------------------------------------------
F32, I8 = DataType.FLOAT, DataType.INT8
BAD_INPUTS = {  # A (dtype, dims), B (dtype, dims), the zero point's dtype (None: none), error, message
    "f16_a": ((DataType.FLOAT16, [3, 8]), (I8, [8, 4]), None, UnsupportedOpError, r"0 \(A\) dtype float16 is not"),
    "batched_b": ((F32, [3, 8]), (I8, [2, 8, 4]), None, UnsupportedOpError, r"\(B\) has dims \[2, 8, 4\]; only a 2-D"),
    "zero_point": ((F32, [3, 8]), (I8, [8, 4]), DataType.UINT8, ShapeInferenceError, r"has dtype uint8; expected int8"),
    "inner_dims": ((F32, [3, 8]), (I8, [6, 4]), None, ShapeInferenceError, r"dim 0 \(6\) must equal input 0 dim -1"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_inputs_are_named(case: str) -> None:
    a, w, zero_point, error, message = BAD_INPUTS[case]
    b = GraphBuilder(case)
    inputs = [b.input("a", *a), b.input("w", *w), b.initializer("s", np.array(0.5, np.float32))]
    inputs += [b.input("z", zero_point, [])] if zero_point is not None else []
    b.output(b.op("DynamicQuantizeMatMul", *inputs, _domain=MS))
    with pytest.raises(error, match=message):
        ShapeInferencePass().run(b.graph, REGISTRY)
