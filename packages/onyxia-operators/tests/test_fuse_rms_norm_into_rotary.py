"""FuseRmsNormIntoRotary: Gemma 3's q_norm / k_norm before RotaryEmbedding as one RmsNormRotary: golden
graph, declined cases (graph unchanged, False), and outputs equal to onnxruntime's and, bit for bit, to the
unfused plan's, with position ids that are not past .. past + S - 1 (random, per batch row, one start)."""

from __future__ import annotations

import textwrap

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph, TensorDef
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseRmsNormIntoRotary

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(13)
MS = "com.microsoft"


def _cache(width: int, dtype: type = np.float32, positions: int = 64) -> tuple[np.ndarray, np.ndarray]:
    angles = np.arange(positions)[:, None] * 1e4 ** (-np.arange(width) / width)[None, :]
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def _graph(
    norm_rows: int = 16,
    x_dims: tuple = ("batch", "seq", 32),
    norm_output: bool = False,
    one_cast: bool = False,
    constants: tuple | None = None,
) -> GraphBuilder:
    """x -> Reshape [0, -1, norm_rows] -> SimplifiedLayerNormalization -> Reshape [0, -1, 32] -> RotaryEmbedding
    (two heads of 16: the cache is 8 wide)."""
    b = GraphBuilder("q_norm")
    if constants is None:
        x = b.input("x", DataType.FLOAT, list(x_dims))
        pos = b.input("pos", DataType.INT64, ["batch", "seq"])
    else:
        x, pos = (b.constant(c) for c in constants)
    cos, sin = (b.initializer(n, c) for n, c in zip(("cos", "sin"), _cache(8)))
    rows = b.op("Reshape", x, b.initializer("rows", np.array([0, -1, norm_rows])), _name="q_norm/Reshape")
    if one_cast:
        rows = b.op("Cast", rows, to=1)
    scale = b.initializer("scale", RNG.standard_normal(norm_rows).astype(np.float32))
    normed = b.op("SimplifiedLayerNormalization", rows, scale, axis=-1, epsilon=1e-6, stash_type=1, _name="q_norm")
    heads = b.op("Reshape", normed, b.initializer("heads", np.array([0, -1, 32])), _name="q_norm/Reshape_1")
    b.output(b.op("RotaryEmbedding", heads, pos, cos, sin, interleaved=0, _domain=MS, _name="q_rotary"))
    if norm_output:
        b.output(normed)
    return b


def _run(graph: IrGraph) -> bool:
    ShapeInferencePass().run(graph, REGISTRY)
    return FuseRmsNormIntoRotary().run(graph, REGISTRY)


def test_norm_and_rotation_become_one_op() -> None:
    b = _graph()
    assert _run(b.graph)
    assert str(b.graph) == textwrap.dedent("""\
        graph q_norm(
          %0:f32[batch,seq,32]  # x
          %1:i64[batch,seq]  # pos
        ) {
          %13:f32[batch,seq,32] = com.onyxia::RmsNormRotary(%0, %1, %2, %3, %7, epsilon=9.999999974752427e-07, interleaved=0)  # q_rotary
          return %13
        }""")
    b.graph.check()
    assert not FuseRmsNormIntoRotary().run(b.graph, REGISTRY)  # settled


@pytest.mark.parametrize(
    "variant",
    [{"norm_rows": 8}, {"norm_output": True}, {"x_dims": ("batch", "seq", 2, 16)}, {"one_cast": True}],
    ids=["rows-are-not-heads", "norm-output-used", "not-a-round-trip", "cast-on-one-side"],
)
def test_declines(variant: dict) -> None:
    b = _graph(**variant)
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not FuseRmsNormIntoRotary().run(b.graph, REGISTRY)
    assert str(b.graph) == before


# ----- numerics ----------------------------------------------------------------------------------
def _model(dtype: type, heads: int, head: int, pos_shape: list, attrs: dict, casts: bool = False) -> onnx.ModelProto:
    """The onnx-community chain; with `casts`, the float16 exports' norm in float32 between two Casts."""
    hidden = heads * head
    width = attrs.get("rotary_embedding_dim", head) // 2
    cos, sin = _cache(width, dtype)
    r, n = ("rw", "nw") if casts else ("r", "n")
    nodes = [
        helper.make_node("Reshape", ["x", "rows"], ["r"]),
        *([helper.make_node("Cast", ["r"], ["rw"], to=1)] if casts else []),
        helper.make_node("SimplifiedLayerNormalization", [r, "scale"], [n], axis=-1, epsilon=1e-6, stash_type=1),
        *([helper.make_node("Cast", ["nw"], ["n"], to=10)] if casts else []),
        helper.make_node("Reshape", ["n", "heads"], ["h"]),
        helper.make_node("RotaryEmbedding", ["h", "pos", "cos", "sin"], ["y"], domain=MS, **attrs),
    ]
    initializers = {
        "rows": np.array([0, -1, head]),
        "heads": np.array([0, -1, hidden]),
        "scale": (1 + 0.3 * RNG.standard_normal(head)).astype(np.float32 if casts else dtype),
        "cos": cos,
        "sin": sin,
    }
    inputs = {"x": (dtype, ["batch", "seq", hidden]), "pos": (np.int64, pos_shape)}
    return graph_model(nodes, inputs, initializers, ["y"])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("interleaved", [0, 1])
def test_outputs_with_arbitrary_positions(dtype: type, interleaved: int) -> None:
    """Positions drawn at random per batch row: a rotation inside attention from seqlens_k would differ."""
    model = _model(dtype, 4, 16, ["batch", "seq"], {"interleaved": interleaved})
    assert ops_of(compile_model(model)) == ["RmsNormRotary"]
    feeds: list[dict[str, np.ndarray]] = [
        {"x": RNG.standard_normal((2, s, 64)).astype(dtype), "pos": RNG.integers(0, 64, (2, s)).astype(np.int64)}
        for s in (5, 1)
    ]
    check_fused(model, feeds, {"FuseRmsNormIntoRotary"})


def test_partial_rotary_and_one_start_position() -> None:
    model = _model(np.float32, 2, 32, [1], {"num_heads": 2, "rotary_embedding_dim": 16})
    assert ops_of(compile_model(model)) == ["RmsNormRotary"]
    feeds: list[dict[str, np.ndarray]] = [
        {"x": RNG.standard_normal((2, 3, 64)).astype(np.float32), "pos": np.array([7], np.int64)}
    ]
    check_fused(model, feeds, {"FuseRmsNormIntoRotary"})


def test_gemma_k_norm_layout() -> None:
    """One KV head of 256 (Gemma 3 270m: the norm's workgroup covers 256 elements)."""
    model = _model(np.float32, 1, 256, ["batch", "seq"], {"interleaved": 0})
    feeds: list[dict[str, np.ndarray]] = [
        {"x": RNG.standard_normal((1, 4, 256)).astype(np.float32), "pos": np.array([[9, 3, 40, 41]], np.int64)}
    ]
    check_fused(model, feeds, {"FuseRmsNormIntoRotary"})


def test_float16_export_norm_in_float32_between_casts() -> None:
    """model_fp16 / model_q4f16: Cast to f32, the norm with an f32 scale, Cast back, the rotation in f16."""
    model = _model(np.float16, 4, 16, ["batch", "seq"], {"interleaved": 0}, casts=True)
    assert ops_of(compile_model(model)) == ["RmsNormRotary"]
    feeds: list[dict[str, np.ndarray]] = [
        {"x": RNG.standard_normal((1, s, 64)).astype(np.float16), "pos": RNG.integers(0, 64, (1, s)).astype(np.int64)}
        for s in (6, 1)
    ]
    check_fused(model, feeds, {"FuseRmsNormIntoRotary"})


def test_constant_input_folds_as_the_unfused_chain() -> None:
    """Folding RmsNormRotary (all inputs known) gives what the unfused chain folds to."""
    x, pos = RNG.standard_normal((2, 3, 32)).astype(np.float32), np.array([[1, 5, 2], [0, 9, 9]])
    unfused = _graph(constants=(x, pos))
    ShapeInferencePass().run(unfused.graph, REGISTRY)
    b = GraphBuilder("folded", opsets={"": 21, "com.microsoft": 1, "com.onyxia": 1})
    cos, sin = (b.constant(c) for c in _cache(8))
    scale = b.constant(_initializer(unfused.graph, "scale"))
    y = b.op("RmsNormRotary", b.constant(x), b.constant(pos), cos, sin, scale, _domain="com.onyxia", epsilon=1e-6)
    b.output(y)
    ShapeInferencePass().run(b.graph, REGISTRY)
    expected = _folded(unfused.graph.tensor(unfused.graph.outputs[0]))
    np.testing.assert_allclose(_folded(b.graph.tensor(y)), expected, rtol=1e-6, atol=1e-6)


def _initializer(graph: IrGraph, name: str) -> np.ndarray:
    tensor = graph.tensor_by_name(name)
    assert tensor is not None and tensor.initializer is not None, f"graph '{graph.name}': no initializer '{name}'"
    return tensor.initializer.numpy()


def _folded(tensor: TensorDef) -> np.ndarray:
    assert tensor.value is not None, f"tensor '{tensor.name}': expected a folded value, found none"
    return tensor.value
