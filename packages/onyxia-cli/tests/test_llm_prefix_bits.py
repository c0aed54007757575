"""A prompt continued over a reused prefix gets the same bits as the prompt prefilled whole.

The server reuses the longest prefix a slot kept and prefills only the rest, so the rest's prefill starts at
any position. GroupQueryAttention's prompt kernel steps each query's keys in fixed steps from an aligned
start; before, a windowed layer's first step followed the chunk's start, the online softmax rescaled at other
keys, and the last token's logits moved by ~1e-6 (fp32) - enough at q4f16 for a seeded draw to change an
answer in the soak. Chunks of 13 tokens put the continuation's chunk starts off the whole prompt's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onyxia.cli.llm.session import LlmSession

DATA = Path(__file__).parent / "data"
TEXT = " ".join(["the river remembers a song of copper bridges and dark harbours under the morning stone"] * 6)
CHUNK = 13


@pytest.mark.parametrize(
    ("layout", "precision"),
    [
        ("gemma3-tiny", "fp32"),
        ("gemma3-tiny", None),
        ("gemma3-tiny-genai/int4", None),
        ("gemma2-tiny-genai/fp32", None),
    ],
)
def test_a_continuation_at_any_start_has_the_whole_prefills_bits(layout: str, precision: str | None) -> None:
    whole_session = LlmSession.from_pretrained(DATA / layout, precision, 256, prefill_chunk=CHUNK)
    ids = whole_session.tokenizer.encode(TEXT)[:90]
    whole = whole_session.next_token_logits(ids)
    for start in (5, 2 * CHUNK + 3):
        session = LlmSession.from_pretrained(DATA / layout, precision, 256, prefill_chunk=CHUNK)
        session.next_token_logits(ids[:start])
        continued = session.next_token_logits(ids[start:])
        assert np.array_equal(continued, whole), (layout, start, float(np.abs(continued - whole).max()))
