"""GroupQueryAttention appending to its KV cache in place: present_key/value aliased to
past_key/value (one GPU buffer each, as the LLM session sets up for batch = kv heads = 1), the
past kept resident, a prefill and several decode and continuation steps fed only q/k/v and the
lengths, each compared with onnxruntime run step by step on explicit past tensors."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from oracle import assert_close, make_model, reference_outputs, runtime

from onyxia.compiler import CompilerPipeline
from onyxia.core import Dispatch, PlanningError
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry

RNG = np.random.default_rng(2)
HEAD, HEADS = 16, 4
ATTRS = {"num_heads": HEADS, "kv_num_heads": 1, "do_rotary": 1, "local_window_size": 6}
PAST = ("past_key", "past_value")


def _feeds(seq: int, total: int, dtype: type) -> dict[str, np.ndarray]:
    def rand(*shape: int) -> np.ndarray:
        return np.asarray(RNG.standard_normal(shape), dtype)

    return {
        "query": rand(1, seq, HEADS * HEAD),
        "key": rand(1, seq, HEAD),
        "value": rand(1, seq, HEAD),
        "past_key": np.zeros((1, 1, total - seq, HEAD), dtype),
        "past_value": np.zeros((1, 1, total - seq, HEAD), dtype),
        "seqlens_k": np.asarray([total - 1], np.int32),
        "total_sequence_length": np.asarray(total, np.int32),
    }


def _model(dtype: type, kv_heads: int = 1) -> onnx.ModelProto:
    feeds = _feeds(1, 1, dtype)
    angles = RNG.random((64, HEAD // 2)) * 6
    feeds.update(cos_cache=np.asarray(np.cos(angles), dtype), sin_cache=np.asarray(np.sin(angles), dtype))
    dims = {"query": [1, "seq", HEADS * HEAD], "key": [1, "seq", kv_heads * HEAD], "value": [1, "seq", kv_heads * HEAD]}
    dims |= {name: [1, kv_heads, "past", HEAD] for name in PAST}
    attrs = ATTRS | {"kv_num_heads": kv_heads}
    return make_model(
        "GroupQueryAttention",
        feeds,
        attrs,
        domain="com.microsoft",
        num_outputs=3,
        dim_params=dims,
        initializers=["cos_cache", "sin_cache"],
    )


def _compile_aliased(model: onnx.ModelProto) -> object:
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        graph = load_and_parse_model(Path(tmp, "model.onnx"))
    for past, present in zip(PAST, ("y1", "y2")):
        graph.aliases[graph.tensor_by_name(present).id] = graph.tensor_by_name(past).id
    return CompilerPipeline(core_operator_registry()).compile(graph)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_gqa_appends_in_place(dtype: type) -> None:
    model = _model(dtype)
    compiled = _compile_aliased(model)
    past_ids = {compiled.tensor_by_name(name).id for name in PAST}
    bound = {
        b.buffer.tensor for op in compiled.operations for s in op.steps if isinstance(s, Dispatch) for b in s.bindings
    }
    assert not past_ids & bound, "an in-place step must not bind the past buffers (they are the present ones)"
    executor = runtime().load_model(compiled)
    executor.keep_resident(list(PAST))
    theirs: dict[str, np.ndarray] = {}
    total = 0
    for seq in (7, 1, 1, 3, 1, 1):  # prefill, decodes, a continuation: the window (6) slides past the prompt
        total += seq
        feeds = _feeds(seq, total, dtype)
        feeds.update({k: v for k, v in theirs.items()})
        expected = reference_outputs(model, feeds, "ort")
        executor.update_dimensions({"past": total - seq, "seq": seq})
        got = executor.run({k: v for k, v in feeds.items() if k not in PAST})
        for name, e in zip(("y0", "y1", "y2"), expected):
            assert_close(got[name], e, f"{name} after {total} tokens")
        theirs = {"past_key": expected[1], "past_value": expected[2]}
    assert executor.stats.pipelines_created == len(compiled.shaders)


def test_gqa_in_place_refuses_several_kv_heads() -> None:
    with pytest.raises(PlanningError, match=r"present aliases past.*kv_num_heads 2"):
        _compile_aliased(_model(np.float32, kv_heads=2))
