"""FuseKvCache: optimum's Concat-grown KV cache as com.onyxia KvAppend: golden graph (the value's Transpose
read in its [B, S, KV, H] layout), declined cases (graph unchanged, False), outputs against onnxruntime on the
plain graph (copying, one symbolic plan, prefill and decode sizes) and, with present aliased to past as the LLM
session aliases them, the in-place append over several steps; a layer's key and value appends, once its
attention is fused, merged into one dispatch (copying and in place)."""

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
from test_fuse_attention import _causal, attention_model
from test_fuse_attention import _feeds as attention_feeds

from onyxia.compiler import CompilerPipeline, ShapeInferencePass
from onyxia.core import DataType, Dispatch, GraphBuilder, PlanningError, TensorDef
from onyxia.core.rewrite import Decline
from onyxia.core.rewrite.engine import try_rule
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry
from onyxia.operators.attention.kv_fusions import MERGE_KV_APPENDS
from onyxia.operators.passes import FuseKvCache

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(41)
HEAD = 8
PAST = ("past_key", "past_value")
PRESENT = ("present_key", "present_value")


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
          %4:f32[1,2,past + seq,8] = com.onyxia::KvAppend(%0, %1, new_layouts=['BSNH'])  # append
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


def _compile(
    model: onnx.ModelProto, aliased: bool = False, names: tuple[tuple[str, str], ...] = tuple(zip(PAST, PRESENT))
) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        graph = load_and_parse_model(Path(tmp, "model.onnx"))
    if aliased:
        for past, present in names:
            graph.aliases[graph.tensor_by_name(present).id] = graph.tensor_by_name(past).id
    return CompilerPipeline(core_operator_registry()).compile(graph)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_append_in_place(dtype: type) -> None:
    """present aliased to past (batch = kv heads = 1): each step writes only its new rows into the resident
    cache, which matches onnxruntime run step by step on explicit past tensors."""
    model = _cache_model(1, 1, dtype)
    compiled = _compile(model, aliased=True)
    assert _dispatching(compiled) == ["KvAppend", "KvAppend"]
    _assert_binds_no_past(compiled, PAST)
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


def _assert_binds_no_past(compiled: Any, names: tuple[str, ...]) -> None:
    past_ids = {compiled.tensor_by_name(name).id for name in names}
    bound = {
        b.buffer.tensor for op in compiled.operations for s in op.steps if isinstance(s, Dispatch) for b in s.bindings
    }
    assert not past_ids & bound, "an in-place append must not bind the past buffers (they are the present ones)"


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


# ----- a layer's two appends as one dispatch -------------------------------------------------------
def test_layer_appends_merge_into_one_dispatch() -> None:
    """optimum's attention over Concat-grown caches (4 heads over 2 kv heads): one KvAppend dispatch for
    both caches, then the attention, equal to onnxruntime and, bit for bit, to the plan of plain Concats."""
    model = attention_model()
    _assert_one_append(_compile(model))
    feeds = [attention_feeds(model, seq, past, _causal(seq, past)) for seq, past in ((5, 0), (1, 5), (3, 6))]
    check_fused(model, feeds, {"FuseKvCache"}, (1e-4, 2e-5))  # onnxruntime's MatMuls sum in another order


def _assert_one_append(compiled: Any) -> None:
    """One KvAppend dispatch besides the attention's (its decode and prompt kernels, picked at run time)."""
    ops = _dispatching(compiled)
    assert ops.count("KvAppend") == 1 and set(ops) == {"KvAppend", "ScaledDotProductAttention"}, ops


def test_merged_append_in_place() -> None:
    """One kv head, the caches graph outputs aliased to the pasts: the merged append writes only the new rows
    of both, and attention reads them there, step after step."""
    model = attention_model(kv=1)
    model.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in ("k_all", "v_all"))
    compiled = _compile(model, aliased=True, names=(("past_k", "k_all"), ("past_v", "v_all")))
    _assert_one_append(compiled)
    _assert_binds_no_past(compiled, ("past_k", "past_v"))
    executor = runtime().load_model(compiled)
    executor.keep_resident(["past_k", "past_v"])
    theirs = {f"past_{n}": np.zeros((1, 1, 0, 16), np.float32) for n in "kv"}
    total = 0
    for seq in (4, 1, 1, 2):
        feeds = {**attention_feeds(model, seq, total, _causal(seq, total), kv=1), **theirs}
        expected = reference_outputs(model, feeds, "ort")
        executor.update_dimensions({"past": total, "seq": seq})
        got = executor.run({k: v for k, v in feeds.items() if k not in theirs})
        for name, e in zip(("y", "k_all", "v_all"), expected):
            assert_close(got[name], e, f"{name} after {total + seq} rows", tolerance=(1e-4, 2e-5))
        theirs = {"past_k": expected[1], "past_v": expected[2]}
        total += seq


def test_merge_declines_one_append_read_as_k_and_v() -> None:
    b = GraphBuilder("shared_cache", opsets={"": 21, "com.onyxia": 1})
    q = b.input("q", DataType.FLOAT, [1, 2, "seq", HEAD])
    past = b.input("past", DataType.FLOAT, [1, 2, "past", HEAD])
    kv = b.op("Concat", past, b.input("new", DataType.FLOAT, [1, 2, "seq", HEAD]), axis=2)
    b.output(b.op("ScaledDotProductAttention", q, kv, kv, _domain="com.onyxia", _name="attention"))
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert FuseKvCache().run(b.graph, REGISTRY)  # the Concat alone
    before = str(b.graph)
    attention = next(n for n in b.graph.nodes if n.name == "attention")
    decline = try_rule(MERGE_KV_APPENDS, b.graph, attention, REGISTRY)
    assert isinstance(decline, Decline) and decline.reason == "one KvAppend is read as both k and v"
    assert not FuseKvCache().run(b.graph, REGISTRY)
    assert str(b.graph) == before
