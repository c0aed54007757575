"""FuseKvCache: optimum's Concat-grown KV cache as com.onyxia KvAppend: golden graph (the value's Transpose
read in its [B, S, KV, H] layout), declined cases (graph unchanged, False), outputs against onnxruntime on the
plain graph (copying, one symbolic plan, prefill and decode sizes) and, with present aliased to past as the LLM
session aliases them, the in-place append over several steps."""

from __future__ import annotations

import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model
from onnx import helper
from oracle import assert_close, reference_outputs, runtime

from onyxia.compiler import CompilerPipeline, ShapeInferencePass
from onyxia.core import DataType, Dispatch, GraphBuilder, PlanningError, TensorDef
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseKvCache

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(41)
HEAD = 8
PAST = ("past_key", "past_value")


def _cache_model(batch: int, kv: int, dtype: type = np.float32) -> onnx.ModelProto:
    """optimum's two cache appends: the key as [B, KV, S, H] (the rotary output), the value as the projection
    [B, S, KV * H] reshaped to [B, S, KV, H] and transposed to [B, KV, S, H]."""
    target = helper.make_node(
        "Constant", [], ["target"], value=onnx.numpy_helper.from_array(np.asarray([0, 0, kv, HEAD], np.int64))
    )
    nodes = [
        target,
        helper.make_node("Reshape", ["v_proj", "target"], ["v_bsnh"]),
        helper.make_node("Transpose", ["v_bsnh"], ["v_new"], perm=[0, 2, 1, 3]),
        helper.make_node("Concat", ["past_key", "k_new"], ["present_key"], axis=-2),
        helper.make_node("Concat", ["past_value", "v_new"], ["present_value"], axis=-2),
    ]
    inputs = {
        "past_key": (dtype, [batch, kv, "past", HEAD]),
        "past_value": (dtype, [batch, kv, "past", HEAD]),
        "k_new": (dtype, [batch, kv, "seq", HEAD]),
        "v_proj": (dtype, [batch, "seq", kv * HEAD]),
    }
    return graph_model(nodes, inputs, {}, ["present_key", "present_value"])


def _feeds(batch: int, kv: int, past: int, seq: int, dtype: type = np.float32) -> dict[str, np.ndarray]:
    def rand(*shape: int) -> np.ndarray:
        return np.asarray(RNG.standard_normal(shape), dtype)

    return {
        "past_key": rand(batch, kv, past, HEAD),
        "past_value": rand(batch, kv, past, HEAD),
        "k_new": rand(batch, kv, seq, HEAD),
        "v_proj": rand(batch, seq, kv * HEAD),
    }


def test_cache_concats_become_kv_appends() -> None:
    b = GraphBuilder("cache")
    past = b.input("past_value", DataType.FLOAT, [1, 2, "past", HEAD])
    v = b.input("v", DataType.FLOAT, [1, "seq", 2, HEAD])
    b.output(b.op("Concat", past, b.op("Transpose", v, perm=[0, 2, 1, 3]), axis=-2, _name="append"))
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert FuseKvCache().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph cache(
          %0:f32[1,2,past,8]  # past_value
          %1:f32[1,seq,2,8]  # v
        ) {
          %4:f32[1,2,past + seq,8] = com.onyxia::KvAppend(%0, %1, new_layout='BSNH')  # append
          return %4
        }""")
    b.graph.check()
    assert not FuseKvCache().run(b.graph, REGISTRY)  # settled


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_copying_append_matches_onnxruntime(dtype: type) -> None:
    """batch 2, 3 kv heads: no aliasing, one dispatch per append copying past and placing the new rows."""
    model = _cache_model(2, 3, dtype)
    compiled = _compile(model)
    assert _dispatching(compiled) == ["KvAppend", "KvAppend"]  # the value's Transpose is gone
    feeds = [_feeds(2, 3, past, seq, dtype) for past, seq in ((0, 5), (5, 1), (6, 3))]
    check_fused(model, feeds, {"FuseKvCache"})


def _dispatching(compiled: Any) -> list[str]:
    """Op types of the operations that dispatch (the Reshape is a view), one entry per dispatch."""
    return [op.op_type for op in compiled.operations for s in op.steps if isinstance(s, Dispatch)]


def _compile(model: onnx.ModelProto, aliased: bool = False) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        graph = load_and_parse_model(Path(tmp, "model.onnx"))
    if aliased:
        for past, present in zip(PAST, ("present_key", "present_value")):
            graph.aliases[graph.tensor_by_name(present).id] = graph.tensor_by_name(past).id
    return CompilerPipeline(core_operator_registry()).compile(graph)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_append_in_place(dtype: type) -> None:
    """present aliased to past (batch = kv heads = 1): each step writes only its new rows into the resident
    cache, which matches onnxruntime run step by step on explicit past tensors."""
    model = _cache_model(1, 1, dtype)
    compiled = _compile(model, aliased=True)
    assert _dispatching(compiled) == ["KvAppend", "KvAppend"]
    past_ids = {compiled.tensor_by_name(name).id for name in PAST}
    bound = {
        b.buffer.tensor for op in compiled.operations for s in op.steps if isinstance(s, Dispatch) for b in s.bindings
    }
    assert not past_ids & bound, "an in-place append must not bind the past buffers (they are the present ones)"
    executor = runtime().load_model(compiled)
    executor.keep_resident(list(PAST))
    theirs = {name: np.zeros((1, 1, 0, HEAD), dtype) for name in PAST}
    total = 0
    for seq in (5, 1, 1, 3, 1):  # a prompt, decode steps, a continuation
        feeds = {**_feeds(1, 1, total, seq, dtype), **theirs}
        expected = reference_outputs(model, feeds, "ort")
        executor.update_dimensions({"past": total, "seq": seq})
        got = executor.run({k: v for k, v in feeds.items() if k not in PAST})
        for name, e in zip(("present_key", "present_value"), expected):
            assert_close(got[name], e, f"{name} after {total + seq} rows")
        theirs = dict(zip(PAST, expected))
        total += seq


def test_in_place_refuses_several_kv_heads() -> None:
    with pytest.raises(PlanningError, match=r"KvAppend.*present aliases past.*2 kv heads"):
        _compile(_cache_model(1, 2), aliased=True)


# ----- declines ----------------------------------------------------------------------------------
def _declined_past_computed(b: GraphBuilder, past: TensorDef, new: TensorDef) -> None:
    b.output(b.op("Concat", b.op("Relu", past), new, axis=2))


def _declined_other_axis(b: GraphBuilder, past: TensorDef, new: TensorDef) -> None:
    b.output(b.op("Concat", past, past, axis=-1))


def _declined_rank(b: GraphBuilder, past: TensorDef, new: TensorDef) -> None:
    flat = b.input("flat_past", DataType.FLOAT, [2, "past", HEAD])
    b.output(b.op("Concat", flat, b.input("flat_new", DataType.FLOAT, [2, "seq", HEAD]), axis=-2))


@pytest.mark.parametrize(
    "build",
    [_declined_past_computed, _declined_other_axis, _declined_rank],
    ids=["past-not-a-graph-input", "not-the-sequence-axis", "not-4d"],
)
def test_declines(build: Callable[[GraphBuilder, TensorDef, TensorDef], None]) -> None:
    b = GraphBuilder("declined")
    past = b.input("past", DataType.FLOAT, [1, 2, "past", HEAD])
    build(b, past, b.input("new", DataType.FLOAT, [1, 2, "seq", HEAD]))
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not FuseKvCache().run(b.graph, REGISTRY)
    assert str(b.graph) == before
