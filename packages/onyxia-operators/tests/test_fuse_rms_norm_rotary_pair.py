"""FuseRmsNormRotaryPair: a layer's q and k RmsNormRotary as one RmsNormRotaryPair: golden graph, declined
pairs (graph unchanged, False), and outputs equal to onnxruntime's on the unfused chains and, bit for bit, to
the plan without the pairing."""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import helper
from oracle import compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseRmsNormRotaryPair

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(31)
MS, ONYXIA = "com.microsoft", "com.onyxia"


def _cache(width: int, dtype: type = np.float32, positions: int = 64) -> tuple[np.ndarray, np.ndarray]:
    angles = np.arange(positions)[:, None] * 1e4 ** (-np.arange(width) / width)[None, :]
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def _graph(k_attrs: dict[str, Any] | None = None, k_cache: bool = False) -> GraphBuilder:
    """q (4 heads of 16) and k (2 heads) through RmsNormRotary at the same positions."""
    b = GraphBuilder("qk")
    q = b.input("q", DataType.FLOAT, ["batch", "seq", 64])
    k = b.input("k", DataType.FLOAT, ["batch", "seq", 32])
    pos = b.input("pos", DataType.INT64, ["batch", "seq"])
    cos, sin = (b.initializer(n, c) for n, c in zip(("cos", "sin"), _cache(8)))
    caches = [(cos, sin), (b.initializer("cos_k", _cache(8)[0]), sin) if k_cache else (cos, sin)]
    for name, x, (c, s), attrs in zip(("q", "k"), (q, k), caches, ({}, k_attrs or {})):
        scale = b.initializer(f"{name}_scale", RNG.standard_normal(16).astype(np.float32))
        y = b.op(
            "RmsNormRotary", x, pos, c, s, scale, _domain=ONYXIA, _name=f"{name}_rotary", **({"epsilon": 1e-6} | attrs)
        )
        b.output(y)
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b


def test_q_and_k_become_one_op() -> None:
    b = _graph()
    assert FuseRmsNormRotaryPair().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph qk(
          %0:f32[batch,seq,64]  # q
          %1:f32[batch,seq,32]  # k
          %2:i64[batch,seq]  # pos
        ) {
          %6:f32[batch,seq,64], %9:f32[batch,seq,32] = com.onyxia::RmsNormRotaryPair(%0, %2, %3, %4, %5, %1, %8, epsilon=1e-06)  # q_rotary
          return %6, %9
        }""")
    b.graph.check()
    assert not FuseRmsNormRotaryPair().run(b.graph, REGISTRY)  # settled


@pytest.mark.parametrize(
    "variant",
    [{"k_attrs": {"epsilon": 1e-5}}, {"k_attrs": {"interleaved": 1}}, {"k_cache": True}],
    ids=["epsilon", "pairing", "other-cache"],
)
def test_nodes_that_differ_form_no_pair(variant: dict[str, Any]) -> None:
    b = _graph(**variant)
    before = str(b.graph)
    assert not FuseRmsNormRotaryPair().run(b.graph, REGISTRY)
    assert str(b.graph) == before


# ----- numerics ----------------------------------------------------------------------------------
def _model(dtype: type, heads: tuple[int, int], head: int, pos_shape: list, attrs: dict) -> onnx.ModelProto:
    """Gemma 3's q_norm and k_norm chains (Reshape, SimplifiedLayerNormalization, Reshape, RotaryEmbedding)."""
    width = attrs.get("rotary_embedding_dim", head) // 2
    cos, sin = _cache(width, dtype)
    nodes, inits = [], {"cos": cos, "sin": sin, "rows": np.array([0, -1, head])}
    inputs: dict[str, tuple[type, list]] = {"pos": (np.int64, pos_shape)}
    for name, n in zip(("q", "k"), heads):
        node_attrs = {**attrs, "num_heads": n} if "rotary_embedding_dim" in attrs else attrs
        nodes += [
            helper.make_node("Reshape", [name, "rows"], [f"{name}_r"]),
            helper.make_node("SimplifiedLayerNormalization", [f"{name}_r", f"{name}_s"], [f"{name}_n"], epsilon=1e-6),
            helper.make_node("Reshape", [f"{name}_n", f"{name}_shape"], [f"{name}_h"]),
            helper.make_node(
                "RotaryEmbedding", [f"{name}_h", "pos", "cos", "sin"], [f"{name}_y"], domain=MS, **node_attrs
            ),
        ]
        inits[f"{name}_s"] = (1 + 0.3 * RNG.standard_normal(head)).astype(dtype)
        inits[f"{name}_shape"] = np.array([0, -1, n * head])
        inputs[name] = (dtype, ["batch", "seq", n * head])
    return graph_model(nodes, inputs, inits, ["q_y", "k_y"])


@pytest.mark.parametrize(
    ("dtype", "heads", "head", "attrs"),
    [
        (np.float32, (4, 1), 256, {}),  # Gemma 3 270m: 4 q heads, 1 kv head of 256
        (np.float32, (4, 2), 16, {"interleaved": 1}),
        (np.float32, (2, 2), 32, {"rotary_embedding_dim": 16}),  # partial rotary
        (np.float16, (4, 2), 16, {}),
    ],
    ids=["gemma3-270m", "interleaved", "partial", "f16"],
)
def test_outputs_equal_onnxruntime_and_the_unfused_plan(dtype: type, heads: tuple, head: int, attrs: dict) -> None:
    model = _model(dtype, heads, head, ["batch", "seq"], attrs)
    assert ops_of(compile_model(model)) == ["RmsNormRotaryPair"]
    feeds = [
        {
            "q": RNG.standard_normal((2, s, heads[0] * head)).astype(dtype),
            "k": RNG.standard_normal((2, s, heads[1] * head)).astype(dtype),
            "pos": RNG.integers(0, 64, (2, s)).astype(np.int64),
        }
        for s in (5, 1)
    ]
    check_fused(model, feeds, {"FuseRmsNormRotaryPair"}, tolerance=(2e-2, 2e-2) if dtype == np.float16 else None)
