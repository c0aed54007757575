"""One step's inputs: token ids at a cache position -> feeds and the dims they bind.

Everything a step needs besides the token ids follows from the position (the attention mask, the
position ids, the past length of each cache), so the host can build a step's inputs before it knows
the token that step consumes (`llm/pipelined.py` leaves the ids out and lets the GPU supply them).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.llm.signature import LlmSignature
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr

if TYPE_CHECKING:
    from onyxia.runtime import PlanExecutor

__all__ = ["StepDims", "step_feeds", "vocab_size"]


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
    return feeds, StepDims(sig, window, symbols)(len(ids), past)


class StepDims:
    """The plan dims (`symbols`) a step binds, from its feeds' shapes alone: `(count, past)` gives
    them for `count` ids appended at cache position `past`. Which name takes which size is worked
    out once (a pipelined decode step then builds no arrays and walks no signature)."""

    def __init__(self, signature: LlmSignature, window: int | None, symbols: Collection[str]) -> None:
        sig = signature
        # each feed's and cache's dims, with the size each takes: its shape as `step_feeds` builds it
        sources: list[tuple[tuple[SymbolicDim, ...], tuple[str, ...]]] = [
            (sig.input_dims[sig.input_ids], ("1", "count"))
        ]
        if sig.attention_mask:
            sources.append((sig.input_dims[sig.attention_mask], ("1", "total")))
        if sig.position_ids:
            sources.append((sig.input_dims[sig.position_ids], ("1", "count")))
        for pair in sig.kv:  # [batch, kv heads, past length (a window's capacity), head size]
            sources.append((pair.past_dims[:1], ("1",)))
            if not pair.windowed or window is not None:
                sources.append((pair.past_dims[2:3], ("window" if pair.windowed else "past",)))
        bound: dict[str, str] = {}
        for dims, sizes in sources:
            for dim, size in zip(dims, sizes):
                if isinstance(dim, SymbolicExpr) and dim.is_name:
                    bound.setdefault(str(dim), size)  # the first binding of a name wins
        self._bound = [(name, size) for name, size in bound.items() if name in symbols]
        self._window = window or 0

    def __call__(self, count: int, past: int) -> dict[str, int]:
        sizes = {"1": 1, "count": count, "total": past + count, "past": past, "window": self._window}
        return {name: sizes[size] for name, size in self._bound}


def vocab_size(executor: PlanExecutor, logits: str) -> int | None:
    """The logits' last dim (rows of the lm head): the number of token ids the model knows."""
    last = executor.compiled.tensor_by_name(logits).dims[-1]
    return last if isinstance(last, int) else None
