"""com.microsoft GroupQueryAttention with a KV cache, against onnxruntime's CPU kernel: decode and
multi-token continuation over a growing past, right-padded batches, windows shorter and longer
than the total, rotary positions from seqlens_k, softcap, f16, grouped heads, onnxruntime-genai's
windowed cache (sliding_window_cache=1) over a prefill + decode loop, and symbolic past/total
lengths rebound without recompiling.

onnxruntime leaves present rows past a batch row's valid length unset (stale memory), so padded and
windowed cases compare those rows masked; Onyxia writes zeros there."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close, check_rebinding, compile_model, make_model, onyxia_outputs, reference_outputs

RNG = np.random.default_rng(1)
HEAD = 16


def _feeds(batch: int, seq: int, past: int, heads: int, kv: int, seqlens: list[int], dtype: type = np.float32) -> dict:
    def rand(*shape: int) -> np.ndarray:
        return np.asarray(RNG.standard_normal(shape), dtype)

    feeds = {
        "query": rand(batch, seq, heads * HEAD),
        "key": rand(batch, seq, kv * HEAD),
        "value": rand(batch, seq, kv * HEAD),
        "past_key": rand(batch, kv, past, HEAD),
        "past_value": rand(batch, kv, past, HEAD),
        "seqlens_k": np.asarray(seqlens, np.int32),
        "total_sequence_length": np.asarray(max(seqlens) + 1, np.int32),
    }
    angles = RNG.random((128, HEAD // 2)) * 6  # onnxruntime wants a cache width that is a multiple of 8
    return feeds | {"cos_cache": np.asarray(np.cos(angles), dtype), "sin_cache": np.asarray(np.sin(angles), dtype)}


def _model(feeds: dict, attrs: dict, dim_params: dict | None = None) -> object:
    return make_model("GroupQueryAttention", feeds, attrs, domain="com.microsoft", num_outputs=3, dim_params=dim_params)


def _valid_rows(present: np.ndarray, seqlens: np.ndarray, capacity: int | None) -> np.ndarray:
    """`present` with the rows onnxruntime leaves unset zeroed (those past each batch row's length)."""
    total = np.asarray(seqlens).reshape(-1) + 1
    valid = np.minimum(total, capacity) if capacity else total
    rows = np.arange(present.shape[2])[None, None, :, None]
    return np.where(rows < valid[:, None, None, None], present, 0).astype(present.dtype)


def _compare(got: list, expected: list, seqlens: np.ndarray, capacity: int | None = None) -> None:
    assert_close(got[0], expected[0], "output")
    for name, a, e in zip(("present_key", "present_value"), got[1:], expected[1:]):
        assert_close(_valid_rows(a, seqlens, capacity), _valid_rows(e, seqlens, capacity), name)


def _check(feeds: dict, attrs: dict, capacity: int | None = None) -> list[np.ndarray]:
    if not attrs.get("do_rotary"):
        feeds = {k: v for k, v in feeds.items() if k not in ("cos_cache", "sin_cache")}
    model = _model(feeds, attrs)
    got = onyxia_outputs(model, feeds)
    _compare(got, reference_outputs(model, feeds, "ort"), feeds["seqlens_k"], capacity)
    return got


# (seq, past, num_heads, kv_num_heads, attributes): one batch row, no padding
CASES = [
    (1, 9, 4, 2, {}),
    (1, 9, 4, 1, {"do_rotary": 1}),
    (1, 40, 4, 1, {"local_window_size": 4, "do_rotary": 1}),
    (1, 9, 2, 2, {"local_window_size": 32, "softcap": 2.0}),
    (1, 70, 4, 2, {"local_window_size": 16, "scale": 0.3}),
    (5, 9, 4, 1, {"do_rotary": 1, "rotary_interleaved": 1}),
    (5, 9, 4, 2, {"local_window_size": 4, "do_rotary": 1}),
    (5, 3, 4, 1, {"local_window_size": 32, "softcap": 3.0}),
    (33, 40, 2, 1, {"local_window_size": 16, "do_rotary": 1}),
]


@pytest.mark.parametrize(("seq", "past", "heads", "kv", "attrs"), CASES, ids=str)
def test_gqa_with_past(seq: int, past: int, heads: int, kv: int, attrs: dict) -> None:
    _check(_feeds(1, seq, past, heads, kv, [past + seq - 1]), {"num_heads": heads, "kv_num_heads": kv, **attrs})


@pytest.mark.parametrize(
    ("seqlens", "attrs"),
    [([9, 4], {}), ([2, 9], {"do_rotary": 1, "local_window_size": 3}), ([9, 0], {"softcap": 1.5, "do_rotary": 1})],
    ids=str,
)
def test_gqa_padded_decode(seqlens: list[int], attrs: dict) -> None:
    # shorter rows append at seqlens_k (not at the past length) and rotate at that position
    _check(_feeds(2, 1, 9, 4, 2, seqlens), {"num_heads": 4, "kv_num_heads": 2, **attrs})


def test_gqa_past_float16() -> None:
    attrs = {"num_heads": 4, "kv_num_heads": 1, "do_rotary": 1, "local_window_size": 8}
    for seq in (1, 4):
        _check(_feeds(2 if seq == 1 else 1, seq, 12, 4, 1, [15] if seq == 4 else [12, 7], np.float16), attrs)


def _windowed_loop(prompt: int, steps: list[int], window: int, dtype: type = np.float32) -> None:
    """A prefill of `prompt` tokens then one run per entry of `steps` (tokens appended), each engine
    feeding its own present back as the next past, as onnxruntime-genai does."""
    attrs = {"num_heads": 4, "kv_num_heads": 1, "do_rotary": 1, "local_window_size": window, "sliding_window_cache": 1}
    dims = {"query": ["b", "s", 64], "key": ["b", "s", 16], "value": ["b", "s", 16]}
    dims |= {"past_key": ["b", 1, "cap", HEAD], "past_value": ["b", 1, "cap", HEAD]}
    feeds = _feeds(1, prompt, window, 4, 1, [prompt - 1], dtype)
    model = _model(feeds, attrs, dims | {"seqlens_k": ["b"]})
    from oracle import runtime

    executor = runtime().load_model(compile_model(model))
    ours = theirs = (np.zeros_like(feeds["past_key"]),) * 2
    total = 0
    for seq in [prompt, *steps]:
        total += seq
        step = _feeds(1, seq, window, 4, 1, [total - 1], dtype) | {k: feeds[k] for k in ("cos_cache", "sin_cache")}
        got = executor.run(step | {"past_key": ours[0], "past_value": ours[1]})
        got = [got[o.name] for o in model.graph.output]
        expected = reference_outputs(model, step | {"past_key": theirs[0], "past_value": theirs[1]}, "ort")
        _compare(got, expected, step["seqlens_k"], window)
        ours, theirs = got[1:], expected[1:]


@pytest.mark.parametrize(
    ("prompt", "steps"), [(5, [1] * 14), (20, [1, 1, 3]), (12, [3, 1, 7, 1])], ids=["fill", "long_prompt", "chunks"]
)
def test_gqa_windowed_cache(prompt: int, steps: list[int]) -> None:
    _windowed_loop(prompt, steps, window=8)


def test_gqa_windowed_cache_float16() -> None:
    _windowed_loop(6, [1, 1, 2], window=8, dtype=np.float16)


def test_gqa_symbolic_past_rebinds_without_recompiling() -> None:
    # one plan for prefill, decode and a continuation; the decode and prompt kernels pick themselves
    attrs = {"num_heads": 4, "kv_num_heads": 2, "local_window_size": 6, "do_rotary": 1}
    dims = {"query": [1, "seq", 64], "key": [1, "seq", 32], "value": [1, "seq", 32]}
    dims |= {"past_key": [1, 2, "past", HEAD], "past_value": [1, 2, "past", HEAD]}
    runs = [_feeds(1, seq, past, 4, 2, [past + seq - 1]) for seq, past in [(7, 0), (1, 7), (1, 8), (3, 9), (1, 12)]]
    model = _model(runs[0], attrs, dims)
    compiled = compile_model(model)
    labels = {"attention/gqa_prefill@tiles", "attention/gqa_decode", "attention/kv_cache"}  # no device: tiles
    assert {s.label for s in compiled.shaders} >= labels
    check_rebinding(model, runs)
