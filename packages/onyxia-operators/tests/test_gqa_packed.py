"""com.microsoft GroupQueryAttention with packed QKV (key and value empty, query
[B, S, (num_heads + 2 * kv_num_heads) * head_size]: onnxruntime-genai's fused projection) against
onnxruntime's CPU kernel: prefill and decode over a growing past, rotary (half-split and
interleaved), one and two KV heads, softcap, local windows, f16, onnxruntime-genai's windowed
cache over a prefill + decode loop, the in-place append, and one plan for prefill and decode.
Every form reads q, k and v straight from the packed buffer: the plans have exactly the dispatches
of the separate-q/k/v plans (no Split, no copy).

onnxruntime leaves present rows past a batch row's valid length unset, so those compare masked."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from oracle import assert_close, compile_model, make_model, onyxia_outputs, reference_outputs, runtime

from onyxia.compiler import CompilerPipeline
from onyxia.core import Dispatch, ShapeInferenceError
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry

RNG = np.random.default_rng(3)
HEAD = 16
PAST = ("past_key", "past_value")


def _feeds(
    batch: int, seq: int, past: int, heads: int, kv: int, seqlens: list[int], dtype: type = np.float32, size: int = HEAD
) -> dict[str, np.ndarray | None]:
    def rand(*shape: int) -> np.ndarray:
        return np.asarray(RNG.standard_normal(shape), dtype)

    angles = RNG.random((128, size // 2)) * 6  # onnxruntime wants a cache width that is a multiple of 8
    return {
        "query": rand(batch, seq, (heads + 2 * kv) * size),
        "key": None,
        "value": None,
        "past_key": rand(batch, kv, past, size) if past else None,
        "past_value": rand(batch, kv, past, size) if past else None,
        "seqlens_k": np.asarray(seqlens, np.int32),
        "total_sequence_length": np.asarray(max(seqlens) + 1, np.int32),
        "cos_cache": np.asarray(np.cos(angles), dtype),
        "sin_cache": np.asarray(np.sin(angles), dtype),
    }


def _model(feeds: dict, attrs: dict, dim_params: dict | None = None) -> object:
    if not attrs.get("do_rotary"):
        feeds.update(cos_cache=None, sin_cache=None)
    return make_model("GroupQueryAttention", feeds, attrs, domain="com.microsoft", num_outputs=3, dim_params=dim_params)


def _valid_rows(present: np.ndarray, seqlens: np.ndarray, capacity: int | None) -> np.ndarray:
    total = np.asarray(seqlens).reshape(-1) + 1
    valid = np.minimum(total, capacity) if capacity else total
    rows = np.arange(present.shape[2])[None, None, :, None]
    return np.where(rows < valid[:, None, None, None], present, 0).astype(present.dtype)


def _compare(got: list, expected: list, seqlens: np.ndarray, capacity: int | None = None) -> None:
    assert_close(got[0], expected[0], "output")
    for name, a, e in zip(("present_key", "present_value"), got[1:], expected[1:]):
        assert_close(_valid_rows(a, seqlens, capacity), _valid_rows(e, seqlens, capacity), name)


def _check(feeds: dict, attrs: dict) -> None:
    model = _model(feeds, attrs)
    given = {k: v for k, v in feeds.items() if v is not None}
    _compare(onyxia_outputs(model, given), reference_outputs(model, given, "ort"), feeds["seqlens_k"])


def _separate(feeds: dict, heads: int, kv: int) -> dict:
    """The same step with q, k and v as three inputs."""
    query = feeds["query"]
    size = query.shape[2] // (heads + 2 * kv)
    q, k, v = np.split(query, [heads * size, (heads + kv) * size], axis=2)
    return feeds | {"query": q, "key": k, "value": v}


# (batch, seq, past, num_heads, kv_num_heads, attributes)
CASES = [
    (1, 7, 0, 4, 2, {}),
    (2, 9, 0, 4, 1, {"do_rotary": 1}),
    (1, 7, 0, 4, 2, {"do_rotary": 1, "rotary_interleaved": 1, "softcap": 2.5}),
    (1, 33, 0, 4, 2, {"do_rotary": 1, "local_window_size": 5}),
    (1, 1, 9, 4, 2, {"do_rotary": 1}),
    (1, 1, 9, 4, 1, {"do_rotary": 1, "rotary_interleaved": 1}),
    (1, 1, 40, 4, 1, {"local_window_size": 4, "do_rotary": 1, "softcap": 3.0}),
    (1, 1, 70, 4, 2, {"local_window_size": 16, "scale": 0.3}),
    (1, 5, 9, 4, 2, {"local_window_size": 4, "do_rotary": 1}),
    (2, 1, 9, 4, 2, {"do_rotary": 1, "softcap": 1.5}),
]


@pytest.mark.parametrize(("batch", "seq", "past", "heads", "kv", "attrs"), CASES, ids=str)
def test_gqa_packed(batch: int, seq: int, past: int, heads: int, kv: int, attrs: dict) -> None:
    seqlens = [past + seq - 1] * batch
    if batch == 2 and seq == 1:
        seqlens = [past, past - 4]  # a shorter row appends and rotates at its own length
    _check(_feeds(batch, seq, past, heads, kv, seqlens), {"num_heads": heads, "kv_num_heads": kv, **attrs})


@pytest.mark.parametrize(("seq", "past"), [(9, 0), (1, 12)], ids=["prefill", "decode"])
def test_gqa_packed_float16(seq: int, past: int) -> None:
    attrs = {"num_heads": 4, "kv_num_heads": 2, "do_rotary": 1, "local_window_size": 8, "softcap": 5.0}
    _check(_feeds(1, seq, past, 4, 2, [past + seq - 1], np.float16), attrs)


def test_gqa_packed_head_size_32() -> None:
    attrs = {"num_heads": 2, "kv_num_heads": 1, "do_rotary": 1, "scale": 0.17678}
    _check(_feeds(1, 6, 3, 2, 1, [8], size=32), attrs)


@pytest.mark.parametrize(("seq", "past"), [(7, 0), (1, 9)], ids=["prefill", "decode"])
def test_gqa_packed_plans_no_extra_dispatch(seq: int, past: int) -> None:
    # the packed plan binds the query buffer where the separate plan binds q, k and v: same steps
    attrs = {"num_heads": 4, "kv_num_heads": 2, "do_rotary": 1}
    packed = _feeds(1, seq, past, 4, 2, [past + seq - 1])
    counts = [compile_model(_model(f, attrs)).dispatch_count for f in (packed, _separate(packed, 4, 2))]
    assert counts[0] == counts[1] == 2


def _windowed_loop(prompt: int, steps: list[int], window: int, kv: int, dtype: type = np.float32) -> None:
    """A prefill of `prompt` tokens then one run per entry of `steps`, each engine feeding its own
    present back as the next past (onnxruntime-genai's sliding_window_cache=1 buffers)."""
    attrs = {"num_heads": 4, "kv_num_heads": kv, "do_rotary": 1, "local_window_size": window, "sliding_window_cache": 1}
    attrs["softcap"] = 50.0
    width = (4 + 2 * kv) * HEAD
    dims = {"query": ["b", "s", width], "seqlens_k": ["b"]}
    dims |= {"past_key": ["b", kv, "cap", HEAD], "past_value": ["b", kv, "cap", HEAD]}
    feeds = _feeds(1, prompt, window, 4, kv, [prompt - 1], dtype)
    model = _model(dict(feeds), attrs, dims)
    executor = runtime().load_model(compile_model(model))
    ours = theirs = (np.zeros_like(feeds["past_key"]),) * 2
    total = 0
    for seq in [prompt, *steps]:
        total += seq
        step = _feeds(1, seq, window, 4, kv, [total - 1], dtype) | {k: feeds[k] for k in ("cos_cache", "sin_cache")}
        step = {k: v for k, v in step.items() if v is not None}
        got = executor.run(step | {"past_key": ours[0], "past_value": ours[1]})
        got = [got[o.name] for o in model.graph.output]
        expected = reference_outputs(model, step | {"past_key": theirs[0], "past_value": theirs[1]}, "ort")
        _compare(got, expected, step["seqlens_k"], window)
        ours, theirs = got[1:], expected[1:]


@pytest.mark.parametrize(("prompt", "steps", "kv"), [(5, [1] * 12, 2), (20, [1, 1, 3], 1)], ids=["fill", "long"])
def test_gqa_packed_windowed_cache(prompt: int, steps: list[int], kv: int) -> None:
    _windowed_loop(prompt, steps, window=8, kv=kv)


def test_gqa_packed_windowed_cache_float16() -> None:
    _windowed_loop(6, [1, 1, 2], window=8, kv=2, dtype=np.float16)


def test_gqa_packed_symbolic_rebinds_without_recompiling() -> None:
    # one plan for prefill, decode and a continuation; the decode and rows kernels pick themselves
    attrs = {"num_heads": 4, "kv_num_heads": 2, "local_window_size": 6, "do_rotary": 1}
    dims = {"query": [1, "seq", 8 * HEAD], "past_key": [1, 2, "past", HEAD], "past_value": [1, 2, "past", HEAD]}
    runs = [_feeds(1, seq, past, 4, 2, [past + seq - 1]) for seq, past in [(7, 1), (1, 7), (1, 8), (3, 9), (1, 12)]]
    model = _model(dict(runs[0]), attrs, dims)
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for feeds in runs:
        given = {k: v for k, v in feeds.items() if v is not None}
        got = executor.run(given)
        _compare([got[o.name] for o in model.graph.output], reference_outputs(model, given, "ort"), feeds["seqlens_k"])
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines, "a new size recompiled"


def test_gqa_packed_key_without_value_is_an_error() -> None:
    feeds = _feeds(1, 7, 0, 4, 2, [6])
    feeds["key"] = np.zeros((1, 7, 2 * HEAD), np.float32)
    with pytest.raises(ShapeInferenceError, match=r"key and value must both be given .* or both be empty"):
        compile_model(_model(feeds, {"num_heads": 4, "kv_num_heads": 2}))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_gqa_packed_appends_in_place(dtype: type) -> None:
    # present aliased to past (the LLM session's setup for one kv head): the new k/v rows go from the
    # packed buffer, k rotated, straight into the resident cache; the past buffers are never bound
    attrs = {"num_heads": 4, "kv_num_heads": 1, "do_rotary": 1, "local_window_size": 6, "softcap": 4.0}
    first = _feeds(1, 1, 1, 4, 1, [1], dtype)
    dims = {"query": [1, "seq", 6 * HEAD], "past_key": [1, 1, "past", HEAD], "past_value": [1, 1, "past", HEAD]}
    model = make_model(
        "GroupQueryAttention",
        first,
        attrs,
        domain="com.microsoft",
        num_outputs=3,
        dim_params=dims,
        initializers=["cos_cache", "sin_cache"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        graph = load_and_parse_model(Path(tmp, "model.onnx"))
    for past, present in zip(PAST, ("y1", "y2")):
        graph.aliases[graph.tensor_by_name(present).id] = graph.tensor_by_name(past).id
    compiled = CompilerPipeline(core_operator_registry()).compile(graph)
    past_ids = {compiled.tensor_by_name(name).id for name in PAST}
    steps = [s for op in compiled.operations for s in op.steps if isinstance(s, Dispatch)]
    assert not past_ids & {b.buffer.tensor for s in steps for b in s.bindings}
    executor = runtime().load_model(compiled)
    executor.keep_resident(list(PAST))
    theirs = {name: np.zeros((1, 1, 0, HEAD), dtype) for name in PAST}
    total = 0
    for seq in (7, 1, 1, 3, 1, 1):  # prefill, decodes, a continuation: the window (6) slides past the prompt
        total += seq
        step = _feeds(1, seq, 0, 4, 1, [total - 1], dtype)
        feeds = {k: v for k, v in step.items() if v is not None and k not in ("cos_cache", "sin_cache")}
        expected = reference_outputs(model, feeds | theirs, "ort")
        executor.update_dimensions({"past": total - seq, "seq": seq})
        got = executor.run(feeds)
        for name, e in zip(("y0", "y1", "y2"), expected):
            assert_close(got[name], e, f"{name} after {total} tokens")
        theirs = {"past_key": expected[1], "past_value": expected[2]}
    assert executor.stats.pipelines_created == len(compiled.shaders)
