"""One step's inputs: token ids at a cache position -> feeds and the dims they bind.

Everything a step needs besides the token ids follows from the position (the attention mask, the
position ids, the past length of each cache), so the host can build a step's inputs before it knows
the token that step consumes (`llm/pipelined.py` leaves the ids out and lets the GPU supply them).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.llm.signature import LlmSignature, bind_names

if TYPE_CHECKING:
    from onyxia.runtime import PlanExecutor

__all__ = ["step_feeds", "vocab_size"]


def step_feeds(
    signature: LlmSignature, ids: list[int], past: int, window: int | None, symbols: Collection[str]
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Feeds for `ids` appended at cache position `past`, and the plan dims (`symbols`) they bind."""
    sig, total = signature, past + len(ids)
    feeds = {sig.input_ids: np.array([ids], np.int64)}
    if sig.attention_mask:
        feeds[sig.attention_mask] = np.ones((1, total), np.int64)
    if sig.position_ids:
        feeds[sig.position_ids] = np.arange(past, total, dtype=np.int64)[None]
    dims: dict[str, int] = {}
    for name, array in feeds.items():
        bind_names(sig.input_dims[name], array.shape, dims)
    for pair in sig.kv:  # [batch, kv heads, past length (a window's capacity), head size]
        length = window if pair.windowed else past
        bind_names(pair.past_dims[:1], (1,), dims)
        if length is not None:
            bind_names(pair.past_dims[2:3], (length,), dims)
    return feeds, {k: v for k, v in dims.items() if k in symbols}


def vocab_size(executor: PlanExecutor, logits: str) -> int | None:
    """The logits' last dim (rows of the lm head): the number of token ids the model knows."""
    last = executor.compiled.tensor_by_name(logits).dims[-1]
    return last if isinstance(last, int) else None
