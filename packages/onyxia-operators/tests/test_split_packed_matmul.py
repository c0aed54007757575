"""GroupMatMuls' split_packed_matmul: Phi-3's packed projections (one MatMul, then last-axis Slices with constant
bounds) as one MatMulGroup of compile-time column blocks: golden graph, the gate/up split gated by FuseMlpGate,
declined cases with their reasons (graph unchanged, False), and outputs equal to onnxruntime's and, bit for bit,
to the plan without the passes, with the export's Shape/Gather/Div bounds."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, TensorDef
from onyxia.core.rewrite import Decline
from onyxia.core.rewrite.engine import try_rule
from onyxia.operators import core_operator_registry
from onyxia.operators.matmul.packed_fusions import SPLIT_PACKED_MATMUL
from onyxia.operators.passes import GroupMatMuls

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(17)
INT_MAX = 2**63 - 1


def _slice(b: GraphBuilder, y: TensorDef, start: int, end: int, axis: int = -1, step: int | None = None) -> TensorDef:
    bounds = [b.initializer(f"b{start}_{end}_{n}", np.asarray([v], np.int64)) for n, v in enumerate((start, end, axis))]
    steps = [b.initializer(f"s{start}_{end}", np.asarray([step], np.int64))] if step is not None else []
    return b.op("Slice", y, *bounds, *steps, _name=f"slice_{start}_{end}")


def _packed(b: GraphBuilder, *, runtime_weight: bool = False) -> TensorDef:
    x = b.input("x", DataType.FLOAT, ["batch", "seq", 8])
    if runtime_weight:
        w = b.input("w_qkv", DataType.FLOAT, [8, 12])
    else:
        w = b.initializer("w_qkv", RNG.standard_normal((8, 12)).astype(np.float32))
    return b.op("MatMul", x, w, _name="qkv_proj")


def test_qkv_slices_become_one_group() -> None:
    b = GraphBuilder("packed")
    y = _packed(b)
    q, k, v = _slice(b, y, 0, 6), _slice(b, y, 6, 9), _slice(b, y, 9, INT_MAX)
    b.output(b.op("Relu", q), k, v)
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert GroupMatMuls().run(b.graph, REGISTRY)
    text = str(b.graph)
    assert text == textwrap.dedent("""\
        graph packed(
          %0:f32[batch,seq,8]  # x
        ) {
          %7:f32[batch,seq,6], %12:f32[batch,seq,3], %17:f32[batch,seq,3] = com.onyxia::MatMulGroup(%0, %21, %22, %23)  # qkv_proj
          %19:f32[batch,seq,6] = Relu(%7)  # Relu
          return %19, %12, %17
        }""")
    b.graph.check()
    w = b.graph.tensor_by_name("w_qkv").initializer.numpy()
    blocks = [b.graph.tensor(t).initializer.numpy() for t in b.graph.nodes[0].inputs[1:]]
    for block, columns in zip(blocks, (slice(0, 6), slice(6, 9), slice(9, 12))):
        np.testing.assert_array_equal(block, w[:, columns])
    assert not GroupMatMuls().run(b.graph, REGISTRY)  # settled


# ----- declines ----------------------------------------------------------------------------------
def _runtime_weight(b: GraphBuilder) -> str:
    y = _packed(b, runtime_weight=True)
    b.output(_slice(b, y, 0, 6), _slice(b, y, 6, 12))
    return "the weight 'w_qkv' is not known at compile time"


def _other_axis(b: GraphBuilder) -> str:
    y = _packed(b)
    b.output(_slice(b, y, 0, 6), _slice(b, y, 0, 1, axis=1))
    return "'slice_0_1' slices axes [1], not the last axis alone"


def _step(b: GraphBuilder) -> str:
    y = _packed(b)
    b.output(_slice(b, y, 0, 6), _slice(b, y, 6, 12, step=2))
    return "'slice_6_12' has steps [2], not 1"


def _overlap(b: GraphBuilder) -> str:
    y = _packed(b)
    b.output(_slice(b, y, 0, 7), _slice(b, y, 6, 12))
    return "the Slices' column ranges [(0, 7), (6, 12)] overlap"


def _empty(b: GraphBuilder) -> str:
    y = _packed(b)
    b.output(_slice(b, y, 0, 6), _slice(b, y, 12, INT_MAX))
    return "'slice_12_9223372036854775807' selects no column"


def _too_many(b: GraphBuilder) -> str:
    y = _packed(b)
    b.output(*(_slice(b, y, 2 * i, 2 * i + 2) for i in range(6)))
    return "6 column blocks do not fit one MatMulGroup (4 slots)"


def _split_of(b: GraphBuilder, sizes: list[int], axis: int = -1) -> tuple[TensorDef, ...]:
    y = _packed(b)
    return b.op("Split", y, b.initializer("sizes", np.asarray(sizes, np.int64)), axis=axis, _outputs=len(sizes))


def _split_other_axis(b: GraphBuilder) -> str:
    b.output(*_split_of(b, [1, 1], axis=0))
    return "'Split' splits axis 0, not the last axis"


def _split_sizes(b: GraphBuilder) -> str:
    b.output(*_split_of(b, [6, 6, 0]))
    return "'Split' splits 12 columns into [6, 6, 0] for 3 outputs"


@pytest.mark.parametrize(
    "build",
    [_runtime_weight, _other_axis, _step, _overlap, _empty, _too_many, _split_other_axis, _split_sizes],
    ids=["runtime-weight", "other-axis", "step", "overlap", "empty", "too-many", "split-axis", "split-sizes"],
)
def test_declines(build: Callable[[GraphBuilder], str]) -> None:
    b = GraphBuilder("declined")
    reason = build(b)
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    decline = try_rule(SPLIT_PACKED_MATMUL, b.graph, b.graph.nodes[0], REGISTRY)
    assert isinstance(decline, Decline)
    assert decline.reason == reason
    assert not GroupMatMuls().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_genai_qkv_split_becomes_one_group_and_matches_onnxruntime() -> None:
    """onnxruntime-genai's fp32 Gemma 3 / Qwen 3: Split(MatMul(x, qkv_proj), [q, k, v], axis=-1)."""
    w = RNG.standard_normal((8, 12)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["qkv"]),
        helper.make_node("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=-1),
    ]
    model = graph_model(
        nodes,
        {"x": (np.float32, ["batch", "seq", 8])},
        {"w": w, "sizes": np.asarray([6, 3, 3], np.int64)},
        ["q", "k", "v"],
    )
    assert ops_of(compile_model(model)) == ["MatMulGroup"]
    feeds = [{"x": RNG.standard_normal((1, n, 8)).astype(np.float32)} for n in (1, 5)]
    check_fused(model, feeds, {"GroupMatMuls"})


def test_another_reader_keeps_the_product() -> None:
    b = GraphBuilder("read")
    y = _packed(b)
    b.output(_slice(b, y, 0, 6), _slice(b, y, 6, 12), b.op("Relu", y))
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not GroupMatMuls().run(b.graph, REGISTRY)
    assert str(b.graph) == before


# ----- numerics: Phi-3's export, bounds from the product's shape --------------------------------
def _const(name: str, value: object) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(value, np.int64)))


def _phi3_mlp(k: int, inner: int, dtype: type) -> onnx.ModelProto:
    """optimum Phi-3's MLP: gate_up = x @ W; half = (shape(gate_up)[-1] + 1) // 2 (as the export computes
    it); gate, up = gate_up[..., :half], gate_up[..., half:2 * half]; y = silu(gate) * up."""
    nodes = [
        helper.make_node("MatMul", ["x", "w_gate_up"], ["gate_up"]),
        helper.make_node("Shape", ["gate_up"], ["shape"]),
        *(_const(n, v) for n, v in (("last", [-1]), ("zero", [0]), ("one", [1]), ("two", [2]))),
        helper.make_node("Gather", ["shape", "last"], ["width"], axis=0),
        helper.make_node("Add", ["width", "one"], ["width_1"]),
        helper.make_node("Div", ["width_1", "two"], ["half"]),
        helper.make_node("Mul", ["half", "two"], ["both"]),
        helper.make_node("Slice", ["gate_up", "zero", "half", "last"], ["gate"]),
        helper.make_node("Slice", ["gate_up", "half", "both", "last"], ["up"]),
        helper.make_node("Sigmoid", ["gate"], ["sigmoid"]),
        helper.make_node("Mul", ["gate", "sigmoid"], ["silu"]),
        helper.make_node("Mul", ["up", "silu"], ["y"]),
    ]
    weights = {"w_gate_up": RNG.standard_normal((k, 2 * inner)).astype(dtype)}
    return graph_model(nodes, {"x": (dtype, ["batch", "seq", k])}, weights, ["y"])


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_gate_up_split_becomes_gated_product(dtype: type) -> None:
    model = _phi3_mlp(24, 20, dtype)
    assert ops_of(compile_model(model)) == ["GatedMatMul"]
    tolerance = None if dtype == np.float32 else (1e-2, 5e-2)  # onnxruntime's f16 MatMul sums in another order
    feeds = [{"x": RNG.standard_normal((1, s, 24)).astype(dtype)} for s in (1, 7, 1)]
    check_fused(model, feeds, {"GroupMatMuls", "FuseMlpGate"}, tolerance)
