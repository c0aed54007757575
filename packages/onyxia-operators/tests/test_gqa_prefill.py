"""GroupQueryAttention's prompt kernel (attention/gqa_prefill) against onnxruntime's CPU kernel, in each of its
variants on lavapipe: `spread` (subgroup broadcasts; 8 keys a step on lavapipe's 8-lane subgroups), `spread4`
(its 4-key step, which those subgroups never take otherwise) and `tiles` (workgroup memory, the GPU form).

Prompts whose lengths are not multiples of the block (spread: 128 items per workgroup, 64 rows of a group
of 2; tiles: 64, 32 rows) and groups that leave items idle (3 heads per kv head), over an empty and a
non-empty past, right-padded rows, windows shorter than the past, softcap, rotary, packed QKV, f16, and the
session's resident cache with rows in slots out of order (every slot's bytes checked, gqa_resident_cases).
A head size that is not a multiple of 4 keeps the rows kernel."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from gqa_resident_cases import Cache, Config, compile_resident
from oracle import assert_close, compile_model, make_model, onyxia_outputs, reference_outputs

from onyxia.core import PlanningError
from onyxia.core.adapter_facts import force_variants

RNG = np.random.default_rng(126)
VARIANTS = ("spread", "spread4", "tiles")


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> Iterator[str]:
    with force_variants({"gqa_prefill": request.param}):
        yield request.param


def _feeds(
    seqlens: list[int], seq: int, past: int, heads: int, kv: int, size: int, *, packed: bool = False, dtype: type
) -> dict[str, np.ndarray | None]:
    def rand(*shape: int) -> np.ndarray:
        return np.asarray(RNG.standard_normal(shape), dtype)

    batch = len(seqlens)
    angles = RNG.random((256, size // 2)) * 6
    width = (heads + 2 * kv) * size if packed else heads * size
    return {
        "query": rand(batch, seq, width),
        "key": None if packed else rand(batch, seq, kv * size),
        "value": None if packed else rand(batch, seq, kv * size),
        "past_key": rand(batch, kv, past, size) if past else None,
        "past_value": rand(batch, kv, past, size) if past else None,
        "seqlens_k": np.asarray(seqlens, np.int32),
        "total_sequence_length": np.asarray(max(seqlens) + 1, np.int32),
        "cos_cache": np.asarray(np.cos(angles), dtype),
        "sin_cache": np.asarray(np.sin(angles), dtype),
    }


def _check_output(feeds: dict[str, np.ndarray | None], attrs: dict) -> list[str]:
    """The attention output against onnxruntime (the kernel writes only that; the caches are kv_cache's);
    returns the plan's shader labels."""
    if not attrs.get("do_rotary"):
        feeds = {**feeds, "cos_cache": None, "sin_cache": None}
    model = make_model("GroupQueryAttention", feeds, attrs, domain="com.microsoft", num_outputs=3)
    given = {k: v for k, v in feeds.items() if v is not None}
    got = onyxia_outputs(model, given)[0]
    assert_close(got, reference_outputs(model, given, "ort")[0], "output")
    return [shader.label for shader in compile_model(model).shaders]


# (valid lengths, seq, past, heads, kv, size, attributes): row b sees valid[b] keys, seqlens_k = valid - 1
CASES = [
    ([70], 70, 0, 4, 2, 16, {"do_rotary": 1, "softcap": 2.0}),  # a partial block, no past
    ([45, 30], 45, 0, 6, 2, 16, {"local_window_size": 20}),  # idle items; row 1 right-padded
    # group 1, a window shorter than the past (onnxruntime takes a past with batch 1 only)
    ([100 + 33], 33, 100, 2, 2, 32, {"do_rotary": 1, "rotary_interleaved": 1, "scale": 0.2, "local_window_size": 40}),
]


@pytest.mark.parametrize(("seqlens", "seq", "past", "heads", "kv", "size", "attrs"), CASES, ids=str)
def test_prompt_steps_match_onnxruntime(
    variant: str, seqlens: list[int], seq: int, past: int, heads: int, kv: int, size: int, attrs: dict
) -> None:
    feeds = _feeds([n - 1 for n in seqlens], seq, past, heads, kv, size, dtype=np.float32)
    labels = _check_output(feeds, {"num_heads": heads, "kv_num_heads": kv, **attrs})
    assert f"attention/gqa_prefill@{variant}" in labels


def test_packed_qkv_float16_over_a_past(variant: str) -> None:
    feeds = _feeds([40 + 23 - 1], 23, 40, 8, 2, 16, packed=True, dtype=np.float16)
    attrs = {"num_heads": 8, "kv_num_heads": 2, "do_rotary": 1, "local_window_size": 32, "softcap": 3.0}
    _check_output(feeds, attrs)


def test_resident_cache_prompts_into_slots_out_of_order(variant: str) -> None:
    """Prompts (S > 1) into slots 2 and 0 of 4 while the others hold stale data; a batched continuation at
    different lengths; a one-token step between (the decode kernel) keeps the prompt kernel's rows right."""
    cfg = Config(heads=4, kv=2, size=16, capacity=64, attrs={"do_rotary": 1, "local_window_size": 20})
    cache = Cache(cfg, 4)  # (its rotary caches hold 64 positions)
    cache.step([(2, 0)], 40)
    cache.step([(0, 0), (3, 0)], 9)
    cache.step([(2, 40), (0, 9)], 1)
    cache.step([(0, 10), (2, 41)], 13)


def test_resident_cache_packed_float16_softcap(variant: str) -> None:
    cfg = Config(heads=6, kv=2, size=16, capacity=96, dtype=np.float16, packed=True, attrs={"softcap": 2.5})
    cache = Cache(cfg, 3)
    cache.step([(1, 0)], 37)
    cache.step([(1, 37), (2, 0)], 20)


def test_a_head_size_not_a_multiple_of_4_keeps_the_rows_kernel() -> None:
    labels = [shader.label for shader in compile_resident(Config(size=18)).shaders]
    assert "attention/gqa" in labels and not any("gqa_prefill" in label for label in labels)


def test_an_unknown_variant_is_refused() -> None:
    with force_variants({"gqa_prefill": "fast"}), pytest.raises(PlanningError, match=r"no variant 'fast'"):
        compile_resident(Config())
