"""com.microsoft GroupQueryAttention prefill (empty past) against onnxruntime's CPU kernel:
head groupings, head sizes, softcap, sliding windows shorter and longer than the sequence,
custom scale, rotary (half-split, interleaved, partial), right padding through seqlens_k, f16,
symbolic sequence length, and the unsupported forms' errors. The KV-cache forms: test_gqa_cache.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from oracle import check_op, check_rebinding, compile_model, make_model

from onyxia.core import UnsupportedOpError

RNG = np.random.default_rng(0)

# (batch, seq, num_heads, kv_num_heads, head_size, attributes)
CASES = [
    (1, 1, 4, 1, 16, {}),
    (1, 7, 4, 2, 16, {}),
    (2, 33, 2, 2, 32, {}),
    (2, 7, 4, 1, 32, {"softcap": 2.5}),
    (1, 33, 4, 2, 16, {"local_window_size": 5}),
    (2, 33, 4, 1, 16, {"local_window_size": 50}),
    (1, 7, 2, 2, 32, {"scale": 0.3}),
    (2, 33, 4, 2, 32, {"softcap": 5.0, "local_window_size": 8, "scale": 0.1}),
    (1, 1, 2, 2, 16, {"local_window_size": 3}),
    (2, 7, 4, 2, 16, {"local_window_size": 1}),
    (1, 7, 2, 1, 80, {}),
    (1, 70, 2, 1, 16, {}),
    (1, 70, 4, 2, 16, {"local_window_size": 20, "softcap": 1.0}),
]


def _inputs(batch: int, seq: int, heads: int, kv_heads: int, size: int, **options: object) -> dict:
    dtype = options.get("dtype", np.float32)
    seqlens = options.get("seqlens", [seq - 1] * batch)
    inputs = {
        "query": np.asarray(RNG.standard_normal((batch, seq, heads * size)), dtype),
        "key": np.asarray(RNG.standard_normal((batch, seq, kv_heads * size)), dtype),
        "value": np.asarray(RNG.standard_normal((batch, seq, kv_heads * size)), dtype),
        "past_key": options.get("past"),
        "past_value": options.get("past"),
        "seqlens_k": np.asarray(seqlens, np.int32),
        "total_sequence_length": np.asarray(seq, np.int32),
    }
    if "rotary_width" in options:  # cos/sin caches [max_position, rotary_dim / 2] of random angles
        angles = RNG.random((64, options["rotary_width"])) * 6
        inputs.update(cos_cache=np.asarray(np.cos(angles), dtype), sin_cache=np.asarray(np.sin(angles), dtype))
    return inputs


def _check(inputs: dict, heads: int, kv_heads: int, attrs: dict | None = None, **kwargs: Any) -> None:
    attrs = {"num_heads": heads, "kv_num_heads": kv_heads, **(attrs or {})}
    check_op("GroupQueryAttention", inputs, attrs, domain="com.microsoft", num_outputs=3, **kwargs)


@pytest.mark.parametrize(("batch", "seq", "heads", "kv_heads", "size", "attrs"), CASES, ids=str)
def test_gqa_prefill(batch: int, seq: int, heads: int, kv_heads: int, size: int, attrs: dict) -> None:
    _check(_inputs(batch, seq, heads, kv_heads, size), heads, kv_heads, attrs)


@pytest.mark.parametrize(
    ("seqlens", "attrs"), [([6, 3], {}), ([6, 0], {"softcap": 3.0}), ([2, 6], {"local_window_size": 2})], ids=str
)
def test_gqa_right_padding(seqlens: list[int], attrs: dict) -> None:
    # padded query rows attend to the real keys only, exactly as onnxruntime's CPU kernel
    _check(_inputs(2, 7, 4, 2, 16, seqlens=seqlens), 4, 2, attrs)


def test_gqa_seqlens_column_and_total_vector() -> None:
    # exporters also give seqlens_k as [B, 1] and total_sequence_length as [1]
    inputs = _inputs(2, 7, 4, 2, 16, seqlens=[6, 4])
    inputs.update(seqlens_k=np.asarray([[6], [4]], np.int32), total_sequence_length=np.asarray([7], np.int32))
    _check(inputs, 4, 2)


# (head size, cos_cache width, interleaved, batch and padding)
ROTARY = [(16, 8, 0, [6]), (16, 8, 1, [6, 4]), (32, 8, 0, [6, 2]), (32, 16, 1, [6])]


@pytest.mark.parametrize(("size", "width", "interleaved", "seqlens"), ROTARY, ids=str)
def test_gqa_rotary(size: int, width: int, interleaved: int, seqlens: list[int]) -> None:
    inputs = _inputs(len(seqlens), 7, 4, 2, size, rotary_width=width, seqlens=seqlens)
    _check(inputs, 4, 2, {"do_rotary": 1, "rotary_interleaved": interleaved, "local_window_size": 5})


def test_gqa_rotary_float16() -> None:
    _check(_inputs(1, 9, 2, 1, 16, rotary_width=8, dtype=np.float16), 2, 1, {"do_rotary": 1})


def test_gqa_float16() -> None:
    _check(_inputs(2, 9, 4, 2, 16, dtype=np.float16), 4, 2, {"local_window_size": 4})


def test_gqa_empty_past_inputs() -> None:
    _check(_inputs(1, 7, 4, 2, 16, past=np.zeros((1, 2, 0, 16), np.float32)), 4, 2)


def test_gqa_symbolic_sequence_rebinds_without_recompiling() -> None:
    dims = {
        "query": ["batch", "seq", 64],
        "key": ["batch", "seq", 32],
        "value": ["batch", "seq", 32],
        "seqlens_k": ["batch"],
    }
    attrs = {"num_heads": 4, "kv_num_heads": 2, "local_window_size": 4, "do_rotary": 1}
    first = _inputs(2, 1, 4, 2, 16, rotary_width=8)
    model = make_model("GroupQueryAttention", first, attrs, domain="com.microsoft", num_outputs=3, dim_params=dims)
    sizes = [_inputs(batch, seq, 4, 2, 16, rotary_width=8) for batch, seq in [(2, 1), (1, 33), (2, 7)]]
    check_rebinding(model, [{k: v for k, v in feeds.items() if v is not None} for feeds in sizes])


def test_gqa_output_only() -> None:
    # present outputs omitted: the cache goes to scratch buffers, which attention reads
    attrs = {"num_heads": 2, "kv_num_heads": 1, "do_rotary": 1}
    inputs = _inputs(1, 7, 2, 1, 16, rotary_width=8)
    check_op("GroupQueryAttention", inputs, attrs, domain="com.microsoft")
    compiled = compile_model(make_model("GroupQueryAttention", inputs, attrs, domain="com.microsoft"))
    assert compiled.dispatch_count == 2 and len(compiled.operations[0].scratch) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"attrs": {"smooth_softmax": 1}}, "smooth_softmax=1 is not implemented"),
        ({"position_ids": np.zeros((1, 7), np.int64)}, r"input 9 \(position_ids\) is not implemented"),
        (
            {"attrs": {"sliding_window_cache": 1, "local_window_size": 8}, "past_key": np.zeros((1, 2, 16, 16))},
            "cache of 16 rows and local_window_size 8: only a capacity equal to the window",
        ),
    ],
    ids=["smooth_softmax", "position_ids", "window_capacity"],
)
def test_gqa_unsupported_forms(change: dict, message: str) -> None:
    inputs = _inputs(1, 7, 4, 2, 16)
    attrs = {"num_heads": 4, "kv_num_heads": 2, **change.pop("attrs", {})}
    if "position_ids" in change:
        inputs.update(cos_cache=None, sin_cache=None)
    if "past_key" in change:
        change["past_key"] = change["past_value"] = change["past_key"].astype(np.float32)
    inputs.update(change)
    model = make_model("GroupQueryAttention", inputs, attrs, domain="com.microsoft", num_outputs=3)
    with pytest.raises(UnsupportedOpError, match=rf"GroupQueryAttention.*{message}"):
        compile_model(model)
