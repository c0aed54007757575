"""`LlmSession.rewind`: keeping a cached prefix and prefilling the rest gives what a fresh prefill of
the whole prompt gives; a sliding-window buffer that cannot rewind starts over; a batch's prefix rule
(`SlotTable.take`, what the server reuses) always feeds at least one prompt token."""

from __future__ import annotations

import dataclasses

import pytest
from llm_cases import session

from onyxia.cli.llm import LlmSession
from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.session import SessionBusyError
from onyxia.cli.llm.slot_table import SlotTable
from onyxia.core import InputError

PROMPT = [2, 100, 200, 300, 400, 500, 600]
OTHER_TAIL = [700, 800, 900]


def _tiny() -> LlmSession:
    llm: LlmSession = session("gemma3-tiny", "fp32")
    return llm


def _fresh(llm: LlmSession, ids: list[int], tokens: int = 8) -> list[int]:
    llm.reset()
    return list(llm.generate_ids(ids, tokens))


def test_rewound_prefix_continues_like_a_fresh_prefill() -> None:
    llm = _tiny()
    diverging = PROMPT[:4] + OTHER_TAIL
    expected = _fresh(llm, diverging)
    _fresh(llm, PROMPT)  # the cache now holds PROMPT and 7 answer tokens
    assert llm.rewind(4) == 4 and llm.position == 4 and llm.history == PROMPT[:4]
    assert list(llm.generate_ids(OTHER_TAIL, 8)) == expected
    assert llm.stats.prompt_tokens == len(OTHER_TAIL)


def test_a_slot_keeps_the_common_prefix_and_feeds_one_token_at_least() -> None:
    llm = _tiny()
    _fresh(llm, PROMPT, 4)
    held = list(llm.history)
    assert held[: len(PROMPT)] == PROMPT
    table = SlotTable(llm)  # one slot: slot 0, whose record is the session's history
    for prompt, kept in (
        (held + [5, 6], len(held)),  # an extension keeps everything
        (PROMPT[:3] + [999], 3),  # diverging at index 3
        (PROMPT[:3], 2),  # a prompt the cache holds whole: its last token is fed again
        ([7, 8], 0),
    ):
        stream = Stream(prompt, 1)
        table.take(stream)
        assert stream.cached == kept and llm.history == prompt[:kept] and llm.position == kept
        table.release(stream)


def test_rewind_refuses_positions_past_the_cache_and_a_busy_session() -> None:
    llm = _tiny()
    _fresh(llm, PROMPT, 2)
    with pytest.raises(InputError, match="expected 0 to 8"):
        llm.rewind(9)
    with pytest.raises(InputError):
        llm.rewind(-1)
    steps = llm.generate_ids([5], 3)
    next(steps)
    with pytest.raises(SessionBusyError):
        llm.rewind(0)
    steps.close()


def test_a_sliding_window_buffer_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime-genai's fixed-capacity buffer: present keeps the past's length (`KvPair.windowed`)."""
    llm = _tiny()
    _fresh(llm, PROMPT, 2)
    kv = list(llm.signature.kv)
    kv[0] = dataclasses.replace(kv[0], present_dims=kv[0].past_dims)
    assert kv[0].windowed
    monkeypatch.setattr(llm, "signature", dataclasses.replace(llm.signature, kv=tuple(kv)))
    monkeypatch.setattr(llm, "shifting", True)  # as if the buffer were not resident (a copied window)
    assert llm.rewind(llm.position) == len(PROMPT) + 1  # keeping everything is still fine
    assert llm.rewind(3) == 0 and llm.history == []
