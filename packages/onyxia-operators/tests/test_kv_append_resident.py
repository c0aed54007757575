"""KvAppend and ScaledDotProductAttention over the LLM session's resident KV layout (onyxia.core.resident_kv):
optimum's Concat caches with plain attention (FuseKvCache + FuseAttention) and PyTorch's ai.onnx Attention
(lowered onto KvAppend + SDPA), compiled with the caches as [4 slots, 2 kv heads, 16 rows, 8] buffers and the
presents aliased to them. Prompts fill one slot each (the other slots' bytes must stay as they were), then
decode steps run 3 rows of different lengths in slots [2, 0, 1] under right-padded masks, then a continuation
prompt; each batch row's output and cache rows are checked against onnxruntime run on that row's own,
unpadded data, and the whole buffers against the expected bytes (stale rows and the unused slot 3 included).
Out-of-capacity rows are refused at run time; a scores output or a missing alias at planning."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest
from onnx import helper
from oracle import assert_close, reference_outputs, runtime
from resident_kv_models import HEAD, PAST, compile_resident, dynamo_layer, plain_layer

from onyxia.core import InputError, PlanningError
from onyxia.core.plan import BufferRef
from onyxia.core.resident_kv import KV_ROWS

RNG = np.random.default_rng(53)
SLOTS, CAPACITY, KV, HEADS = 4, 16, 2, 4
TOLERANCE = (1e-4, 2e-5)  # onnxruntime's MatMuls and softmax sum in another order
LAYERS = {"optimum": plain_layer, "dynamo": dynamo_layer}
# (slots of the run's batch rows, new rows): prompts into one slot each, decode steps over three rows at
# different lengths in slots [2, 0, 1], a continuation prompt into slot 0, a last decode step
SCENARIO = [([2], 5), ([0], 3), ([1], 6), ([2, 0, 1], 1), ([2, 0, 1], 1), ([0], 3), ([2, 0, 1], 1)]


@cache
def _compiled(kind: str) -> Any:
    return compile_resident(LAYERS[kind](HEADS, KV, rows_input=True), CAPACITY)


def _ops(compiled: Any) -> list[str]:
    return [op.op_type for op in compiled.operations]


class _Resident:
    """One executor with the resident caches, and the test's copy of what the buffers must hold."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.reference = LAYERS[kind](HEADS, KV, rows_input=False)
        self.executor = runtime().load_model(_compiled(kind))
        self.executor.keep_resident(list(PAST))
        # stale bytes everywhere: a slot's rows past its length are never zeros in a session
        self.caches = [RNG.standard_normal((SLOTS, KV, CAPACITY, HEAD)).astype(np.float32) for _ in PAST]
        for name, buffer in zip(PAST, self.caches):
            self.executor.write_input(name, buffer)
        self.lengths = [0] * SLOTS

    def step(self, slots: list[int], seq: int) -> None:
        """One run: batch row b appends `seq` rows to slot slots[b]; outputs and both buffers checked."""
        batch, lengths = len(slots), [self.lengths[s] for s in slots]
        past = max(lengths)
        total = past + seq
        feeds = self._new_rows(batch, seq)
        mask = np.zeros((batch, total), np.bool_)
        for b, length in enumerate(lengths):
            mask[b, : length + seq] = True  # right-padded: the row's own keys, then stale ones hidden
        feeds["attention_mask"], feeds["causal"] = mask, _causal(seq, past)
        rows = np.asarray([[s, n] for s, n in zip(slots, lengths)], np.int32)
        self.executor.update_dimensions({"batch": batch, "past": past, "seq": seq})
        got = self.executor.run({**feeds, KV_ROWS: rows}, outputs=["y"])["y"]
        for b, (slot, length) in enumerate(zip(slots, lengths)):
            expected = self._row_reference(feeds, b, slot, length, seq)
            assert_close(got[b], expected, f"y of row {b} (slot {slot}, {length} + {seq} rows)", tolerance=TOLERANCE)
            self.lengths[slot] = length + seq
        for name, buffer in zip(PAST, self.caches):
            np.testing.assert_array_equal(self.read(name), buffer, err_msg=f"{name} buffer after {slots}, {seq}")

    def _new_rows(self, batch: int, seq: int) -> dict[str, np.ndarray]:
        def rand(*shape: int) -> np.ndarray:
            return RNG.standard_normal(shape).astype(np.float32)

        feeds = {"q": rand(batch, HEADS, seq, HEAD), "k": rand(batch, KV, seq, HEAD)}
        if self.kind == "optimum":
            feeds["v_proj"] = rand(batch, seq, KV * HEAD)
        else:
            feeds["v"] = rand(batch, KV, seq, HEAD)
        return feeds

    def _row_reference(self, feeds: dict[str, np.ndarray], b: int, slot: int, length: int, seq: int) -> np.ndarray:
        """onnxruntime on row b alone, its past the slot's first `length` rows; the expected buffers take its
        presents (the rows the append must have written)."""
        row = {name: feeds[name][b : b + 1] for name in feeds if name not in ("attention_mask", "causal")}
        row["attention_mask"], row["causal"] = np.ones((1, length + seq), np.bool_), _causal(seq, length)
        for name, buffer in zip(PAST, self.caches):
            row[name] = buffer[slot : slot + 1, :, :length]
        y, *presents = reference_outputs(self.reference, row, "ort")
        for buffer, present in zip(self.caches, presents):
            buffer[slot, :, : length + seq] = present[0]
        return np.asarray(y[0])

    def read(self, name: str) -> np.ndarray:
        """The whole physical buffer of a resident cache, [SLOTS, KV, CAPACITY, HEAD]."""
        ref = BufferRef(tensor=self.executor.compiled.tensor_by_name(name).id)
        count = SLOTS * KV * CAPACITY * HEAD
        data = self.executor.ctx.queue.read_buffer(self.executor._pool.get(ref), 0, count * 4)
        return np.frombuffer(data, np.float32).reshape(SLOTS, KV, CAPACITY, HEAD)


def _causal(seq: int, past: int) -> np.ndarray:
    """Query s sits at position past + s (the cache's bottom-right alignment)."""
    return np.arange(past + seq)[None, :] <= past + np.arange(seq)[:, None]


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_resident_rows_in_slots_match_onnxruntime_per_row(kind: str) -> None:
    """The fusions still fire; each step writes only its new rows (in their slots, at each row's own length)
    and a decode step is one KvAppend and one attention dispatch."""
    ops = _ops(_compiled(kind))
    assert ops.count("KvAppend") == 1 and ops.count("ScaledDotProductAttention") == 1, ops
    assert not {"Concat", "Softmax", "Attention"} & set(ops), ops
    resident = _Resident(kind)
    for slots, seq in SCENARIO:
        resident.step(slots, seq)
        if seq == 1:
            live = [op for _, op in resident.executor.live_dispatches()]
            assert live.count("KvAppend") == 1 and live.count("ScaledDotProductAttention") == 1, live


def test_rows_past_the_capacity_are_refused_and_not_written() -> None:
    resident = _Resident("optimum")
    resident.step([3], 4)
    before = [resident.read(name) for name in PAST]
    resident.executor.update_dimensions({"batch": 1, "past": 4, "seq": 13})
    feeds = resident._new_rows(1, 13) | {"attention_mask": np.ones((1, 17), np.bool_), "causal": _causal(13, 4)}
    with pytest.raises(InputError, match=r"KvAppend.*capacity 16"):
        resident.executor.run({**feeds, KV_ROWS: np.asarray([[3, 4]], np.int32)}, outputs=["y"])
    for name, expected in zip(PAST, before):
        np.testing.assert_array_equal(resident.read(name), expected, err_msg=f"{name}: a refused row was written")


def test_scores_output_over_resident_caches_is_refused_at_planning() -> None:
    model = dynamo_layer(HEADS, KV, rows_input=True)
    next(node for node in model.graph.node if node.op_type == "Attention").output.append("qk")
    model.graph.output.append(helper.make_empty_tensor_value_info("qk"))
    with pytest.raises(PlanningError, match=r"ScaledDotProductAttention.*output 1 \(qk\).*resident"):
        compile_resident(model, CAPACITY)


def test_resident_past_without_alias_is_refused() -> None:
    with pytest.raises(PlanningError, match=r"KvAppend.*resident KV layout.*aliased"):
        compile_resident(plain_layer(HEADS, KV, rows_input=True), CAPACITY, aliased=False)
