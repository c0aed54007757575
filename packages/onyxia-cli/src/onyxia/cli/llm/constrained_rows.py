"""The host side of constrained rows in one run: their masks, built before it is submitted, and the same mask on
the host for a row that samples there (top-p, repetition penalty).

A run whose rows are all unconstrained leaves the resident mask all ones (`set_allowed` skips the write when it
already is), so unconstrained decoding uploads nothing more. A constrained run writes one
[rows, ceil(V / 32)] int32 array (512 bytes a row for a 4k vocabulary, 19 KB for Qwen's 152k); its
unconstrained rows get all ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.llm.constraints import GrammarMatcher, grammar_tokenizer, mask_words
from onyxia.cli.llm.generation_passes import ALLOWED_TOKENS
from onyxia.core import InputError

if TYPE_CHECKING:
    from onyxia.cli.llm.batch_stream import Stream
    from onyxia.cli.llm.session import LlmSession

__all__ = ["allowed_masks", "attach_matcher", "masked_logits", "set_allowed"]


def attach_matcher(session: LlmSession, stream: Stream) -> None:
    """Check the stream's constraint against the model (an `InputError` before anything runs) and give the stream
    its matcher."""
    if stream.constraint is None:
        return
    if ALLOWED_TOKENS not in session.executor.input_names:
        raise InputError(
            "constrained decoding needs a static vocabulary width (the logits' last dim); this model's is symbolic"
        )
    tokenizer = grammar_tokenizer(session)
    stream.matcher = GrammarMatcher(tokenizer, stream.constraint.check(tokenizer))


def allowed_masks(session: LlmSession, matchers: Sequence[GrammarMatcher | None]) -> np.ndarray | None:
    """One mask row per run row (all ones for an unconstrained one); None when no row is constrained."""
    if all(m is None for m in matchers):
        return None
    words = mask_words(session.vocab_size or 0)
    masks = np.full((len(matchers), words), -1, np.int32)
    for row, matcher in zip(masks, matchers):
        if matcher is not None:
            matcher.allowed_into(row)
    return masks


def masked_logits(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """`logits` (one row) with every id the mask disallows at -inf, for the host sampler."""
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: logits.size].astype(bool)
    return np.where(bits, logits.astype(np.float32), -np.inf)


def set_allowed(session: LlmSession, masks: np.ndarray | None) -> None:
    """Queue SampleToken's allowed-token masks for the session's next run (int32 [rows, ceil(V / 32)]); None:
    every id allowed, written only when a constrained run left other bits (`session.masked`)."""
    if masks is None and not session.masked:
        return
    if masks is None:
        masks = np.full((session.slots, mask_words(session.vocab_size or 0)), -1, np.int32)
    session.executor.write_input(ALLOWED_TOKENS, masks)
    session.masked = not bool((masks == -1).all())
