"""GroupQueryAttention refuses a seqlens_k value outside [0, present length), as onnxruntime does
("seqlens_k[0] = 3 is out of range [0, 3)"). seqlens_k is a run-time value (often computed on the GPU
from the attention mask), so the attention kernels report it in the node's error slot and run()
raises an InputError naming the node and input; the next good run is unaffected. Covered: the rows
kernel (prompts), the decode kernel over a growing cache, and the in-place decode kernel that appends."""

from __future__ import annotations

import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from oracle import assert_close, compile_model, make_model, reference_outputs, runtime

from onyxia.compiler import CompilerPipeline
from onyxia.core.errors import InputError
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry

RNG = np.random.default_rng(7)
HEAD, HEADS, KV_HEADS = 16, 2, 1
ATTRS = {"num_heads": HEADS, "kv_num_heads": KV_HEADS}


def _feeds(batch: int, seq: int, past: int, seqlens: list[int]) -> dict[str, Any]:
    def rand(*shape: int) -> np.ndarray:
        return RNG.standard_normal(shape).astype(np.float32)

    return {
        "query": rand(batch, seq, HEADS * HEAD),
        "key": rand(batch, seq, KV_HEADS * HEAD),
        "value": rand(batch, seq, KV_HEADS * HEAD),
        "past_key": rand(batch, KV_HEADS, past, HEAD) if past else None,
        "past_value": rand(batch, KV_HEADS, past, HEAD) if past else None,
        "seqlens_k": np.asarray(seqlens, np.int32),
        "total_sequence_length": np.asarray(past + seq, np.int32),
    }


def _model(feeds: dict[str, Any], dims: dict[str, list[int | str]] | None = None) -> onnx.ModelProto:
    model = make_model("GroupQueryAttention", feeds, ATTRS, domain="com.microsoft", num_outputs=3, dim_params=dims)
    model.graph.node[0].name = "attn"
    return model


@cache
def _executor(batch: int, seq: int, past: int) -> tuple[onnx.ModelProto, Any]:
    model = _model(_feeds(batch, seq, past, [0] * batch))
    return model, runtime().load_model(compile_model(model))


def _ort_message(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> str:
    with pytest.raises(Exception, match="is out of range") as caught:
        reference_outputs(model, feeds, "ort")
    return str(caught.value)


def _assert_refused(executor: Any, feeds: dict[str, np.ndarray], value: int, total: int | str) -> None:
    """`total`: the present length, as the plan knows it (a number, or the dims' expression)."""
    expected = (
        rf"node 'attn' \(GroupQueryAttention\): index {value} is out of range for input 5 \(seqlens_k\): "
        rf"each seqlens_k\[b\] must lie in {re.escape(f'[0, {total})')}"
    )
    with pytest.raises(InputError, match=expected):
        executor.run(feeds)


@pytest.mark.parametrize(
    ("batch", "seq", "past", "seqlens", "bad"),
    [
        (1, 3, 0, [3], 0),  # prompt: the rows kernel
        (1, 3, 0, [-1], 0),
        (2, 3, 0, [2, 5], 1),
        (1, 1, 4, [5], 0),  # one-token step over a growing cache: the decode kernel
        (1, 1, 4, [-2], 0),
    ],
    ids=str,
)
def test_out_of_range_seqlens_k_is_refused_as_onnxruntime_does(
    batch: int, seq: int, past: int, seqlens: list[int], bad: int
) -> None:
    model, executor = _executor(batch, seq, past)
    feeds = {k: v for k, v in _feeds(batch, seq, past, seqlens).items() if v is not None}
    total = past + seq
    assert f"seqlens_k[{bad}] = {seqlens[bad]} is out of range [0, {total})" in _ort_message(model, feeds)
    _assert_refused(executor, feeds, seqlens[bad], total)
    good = {**feeds, "seqlens_k": np.full(batch, total - 1, np.int32)}  # the word was cleared: runs normally
    got = executor.run(good)
    for name, expected in zip(("y0", "y1", "y2"), reference_outputs(model, good, "ort")):
        assert_close(got[name], expected, name)


def test_in_place_decode_refuses_seqlens_k_past_the_cache() -> None:
    """present aliased to past (the LLM session's cache): the one-token step runs gqa_decode_append."""
    feeds = _feeds(1, 1, 1, [0])
    dims: dict[str, list[int | str]] = {name: [1, "seq", n * HEAD] for name, n in (("query", HEADS),)}
    dims |= {name: [1, "seq", KV_HEADS * HEAD] for name in ("key", "value")}
    dims |= {name: [1, KV_HEADS, "past", HEAD] for name in ("past_key", "past_value")}
    model = _model(feeds, dims)
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        graph = load_and_parse_model(Path(tmp, "model.onnx"))
    for past, present in (("past_key", "y1"), ("past_value", "y2")):
        graph.aliases[graph.tensor_by_name(present).id] = graph.tensor_by_name(past).id
    compiled = CompilerPipeline(core_operator_registry()).compile(graph)
    assert any(op.op_type == "GroupQueryAttention" for op in compiled.operations)
    assert any("gqa_decode_append" in shader.label for shader in compiled.shaders)
    executor = runtime().load_model(compiled)
    executor.keep_resident(["past_key", "past_value"])
    executor.update_dimensions({"past": 0, "seq": 3})
    prompt = _feeds(1, 3, 0, [2])
    executor.run({k: v for k, v in prompt.items() if v is not None and k not in ("past_key", "past_value")})
    executor.update_dimensions({"past": 3, "seq": 1})
    step = {k: v for k, v in _feeds(1, 1, 3, [4]).items() if k not in ("past_key", "past_value")}
    _assert_refused(executor, step, 4, "past + seq")  # the plan's bound, 4 at these dims
