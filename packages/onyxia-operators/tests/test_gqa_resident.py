"""GroupQueryAttention over the LLM session's resident KV cache ([slots, kv_heads, capacity, head_size], batch
row b in slot kv_rows[b, 0]; onnxruntime's past_present_share_buffer mode): batched rows at different lengths
in slots out of order, prompts and decode steps, packed QKV with rotary, a local window, softcap, f16; every
output and the whole slot buffer after every step equal onnxruntime run per row on ordinary caches
(gqa_resident_cases). The writers write only the new rows, and a decode step is one dispatch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gqa_resident_cases import Cache, Config, compile_resident

from onyxia.core import CopyBuffer, Dispatch, OnyxiaError, PlanningError

SLOTS = 4
SOFTCAP = Config(attrs={"softcap": 2.5, "scale": 0.3})
PACKED_ROTARY_WINDOW = Config(packed=True, attrs={"do_rotary": 1, "rotary_interleaved": 0, "local_window_size": 4})


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_batched_rows_at_different_lengths_in_any_slots(dtype: type) -> None:
    cache = Cache(Config(dtype=dtype, attrs=SOFTCAP.attrs), SLOTS)
    lengths = {2: 5, 0: 2, 1: 9}  # slot -> rows it holds (stale data beyond); slot 3 is in no row
    for seq in (1, 1, 3, 1):  # decode steps and a batched continuation, all rows at their own lengths
        rows = [(slot, lengths[slot]) for slot in (2, 0, 1)]
        dispatches = cache.step(rows, seq)
        assert len(dispatches) == (1 if seq == 1 else 2), dispatches  # decode: the fused append + attention
        lengths = {slot: length + seq for slot, length in rows}


def test_a_prompt_into_one_slot_leaves_the_others_untouched() -> None:
    cache = Cache(SOFTCAP, SLOTS)
    cache.step([(1, 0)], 6)  # a first prompt into slot 1: the other slots' bytes are checked unchanged
    cache.step([(1, 6)], 1)
    cache.step([(3, 0), (1, 7)], 1)  # a new sequence joins at slot 3 (one token) beside the running one


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_packed_qkv_rotary_and_a_local_window(dtype: type) -> None:
    """Rotary positions are each row's own (from seqlens_k); the window (4) hides each row's early keys."""
    cfg = Config(dtype=dtype, packed=True, attrs=PACKED_ROTARY_WINDOW.attrs)
    cache = Cache(cfg, SLOTS)
    cache.step([(3, 0)], 5)  # a prompt longer than the window
    lengths = {3: 5, 0: 11}
    for seq in (1, 2, 1, 1):
        rows = [(slot, lengths[slot]) for slot in (3, 0)]
        cache.step(rows, seq)
        lengths = {slot: length + seq for slot, length in rows}


def test_the_plan_writes_only_the_new_rows() -> None:
    """No copy step, no past binding read-only, and the cache writer's elements are batch * kv * seq * size
    (not the capacity's rows); the decode step's writer has no workgroups."""
    cfg = SOFTCAP
    compiled = compile_resident(cfg)
    steps = [step for op in compiled.operations for step in op.steps]
    assert not [step for step in steps if isinstance(step, CopyBuffer)]
    dispatches = [step for step in steps if isinstance(step, Dispatch)]
    past = {compiled.tensor_by_name(name).id for name in ("past_key", "past_value")}
    assert all(not b.read_only for d in dispatches for b in d.bindings if b.buffer.tensor in past)
    writer = next(d for d in dispatches if compiled.shaders[d.shader_index].label.endswith("kv_cache"))
    for batch, seq in ((3, 5), (2, 1)):
        groups = writer.workgroups[0]
        count = groups if isinstance(groups, int) else groups.evaluate({"batch": batch, "seq": seq})
        expected = 0 if seq == 1 else math.ceil(batch * cfg.kv * seq * cfg.size / 256)
        assert count == expected, (batch, seq, count)


def test_the_attribute_and_the_layout_must_agree() -> None:
    with pytest.raises(PlanningError, match=r"past_present_share_buffer=1, but past_key is not a resident"):
        compile_resident(SOFTCAP, layout=False)
    with pytest.raises(PlanningError, match=r"past_present_share_buffer=0, but past_key is a resident"):
        compile_resident(SOFTCAP, attribute=False)


def test_a_shared_buffer_is_never_windowed() -> None:
    """The session turns a windowed genai cache into a full one (sliding_window_cache=0, local_window_size kept)."""
    windowed = Config(capacity=8, attrs={"sliding_window_cache": 1, "local_window_size": 8})
    with pytest.raises(OnyxiaError, match=r"past_present_share_buffer=1 with sliding_window_cache=1"):
        compile_resident(windowed)
