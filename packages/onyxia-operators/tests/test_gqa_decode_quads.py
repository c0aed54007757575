"""GroupQueryAttention's one-token step on the quads kernel (gqa_decode_quads.wgsl: a workgroup per kv head, its
lanes in quads), which a compile for a device with subgroups picks: batched rows at different lengths in any slots
of the resident cache, against onnxruntime run per row (gqa_resident_cases), and each row's output bit-identical
to the same row run alone, so a stream served in a batch gets exactly the tokens it gets alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from gqa_resident_cases import Cache, Config
from oracle import runtime

from onyxia.core.adapter_facts import target_adapter
from onyxia.core.resident_kv import KV_ROWS
from onyxia.runtime import adapter_facts_of

SLOTS = 4
CASES = {
    "softcap": Config(size=32, attrs={"softcap": 2.5, "scale": 0.3}),  # 4 heads, 2 kv heads
    # one kv head: its query heads split over two workgroups
    "one-kv-head": Config(heads=4, kv=1, size=16, attrs={"local_window_size": 6}),
    "packed-rotary": Config(
        heads=6, kv=2, size=16, packed=True, attrs={"do_rotary": 1, "rotary_interleaved": 1, "scale": 0.5}
    ),
}


@contextmanager
def _device_facts() -> Iterator[None]:
    """Compile for the test device itself (subgroups), as the LLM session does."""
    with target_adapter(adapter_facts_of(runtime())):
        yield


def _cache(cfg: Config) -> Cache:
    with _device_facts():
        cache = Cache(cfg, SLOTS)
    labels = [shader.label for shader in cache.executor.compiled.shaders]
    assert "attention/gqa_decode_quads" in labels, labels
    return cache


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_batched_steps_against_onnxruntime(name: str, dtype: type) -> None:
    cfg = Config(**{**CASES[name].__dict__, "dtype": dtype})
    cache = _cache(cfg)
    cache.step([(1, 0)], 7)  # a prompt into slot 1 (the rows kernel), then decode steps over every slot
    lengths = {2: 5, 0: 2, 1: 7}  # slot -> rows it holds (slots 0 and 2: the stale data hides behind seqlens_k)
    for step in range(3):
        rows = [(slot, lengths[slot]) for slot in (2, 0, 1)[: 3 - step % 2]]
        assert len(cache.step(rows, 1)) == 1  # one dispatch: the append and attention together
        lengths |= {slot: length + 1 for slot, length in rows}
    cache.step([(3, 0)], 1)  # a first token alone in a slot (one key: its own)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_row_in_a_batch_is_the_row_alone(name: str) -> None:
    cfg = CASES[name]
    cache = _cache(cfg)
    rows = [(3, 9), (0, 1), (2, 20), (1, 14)]
    rng = np.random.default_rng(3)
    width = (cfg.heads + 2 * cfg.kv) * cfg.size if cfg.packed else cfg.heads * cfg.size
    query: np.ndarray = rng.standard_normal((len(rows), 1, width)).astype(cfg.dtype)
    new: np.ndarray = rng.standard_normal((2, len(rows), 1, cfg.kv * cfg.size)).astype(cfg.dtype)

    def run(picked: list[int]) -> np.ndarray:
        feeds = {"query": query[picked]}
        if not cfg.packed:
            feeds |= {"key": new[0][picked], "value": new[1][picked]}
        lengths = [rows[i][1] for i in picked]
        feeds |= {"seqlens_k": np.asarray(lengths, np.int32), KV_ROWS: np.asarray([rows[i] for i in picked], np.int32)}
        feeds["total_sequence_length"] = np.asarray(max(lengths) + 1, np.int32)
        cache.executor.update_dimensions({"batch": len(picked), "seq": 1})
        return cache.executor.run(feeds, outputs=["y0"])["y0"]

    together = run(list(range(len(rows))))  # rewriting a row's new key and value is idempotent: same inputs
    for i in range(len(rows)):
        alone = run([i])
        assert np.array_equal(together[i], alone[0]), f"row {i} {rows[i]} differs from the row alone"
