"""One run's inputs: for each batch row its slot, the tokens that slot has cached and the ids it appends -> feeds
and the dims they bind.

Everything a run needs besides the token ids follows from the rows' slots and cached lengths (the attention
mask, the position ids, the past length, the resident cache's row table), so the host can build a step's
inputs before it knows the tokens that step consumes (`llm/pipelined.py` and `llm/carried_steps.py` feed no
ids and let the GPU supply them). Rows of one run may have cached different lengths (continuous batching): the run's past
length is the longest, and each row's attention mask is right-padded (ones for its own keys, zeros after),
so no row sees another's or a stale key; its position ids and its cache row (`KV_ROWS`) are its own.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from onyxia.cli.llm.generation_passes import LAST_ROWS
from onyxia.cli.llm.signature import LlmSignature
from onyxia.core import InputError
from onyxia.core.resident_kv import KV_ROWS
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession
    from onyxia.runtime import PlanExecutor

__all__ = ["Row", "StepDims", "checked_token_ids", "per_row_positions", "step_feeds", "vocab_size"]


class Row(NamedTuple):
    """One batch row of a run: the cache slot it extends and the tokens that slot holds before the run (a
    tuple: a decode step makes one per row)."""

    slot: int
    past: int


def step_feeds(
    signature: LlmSignature,
    rows: Sequence[Row],
    ids: Sequence[Sequence[int]],
    count: int,
    dims: StepDims,
    lengths: Sequence[int] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Feeds for `count` tokens appended to each row (`ids`: one list per row), and the plan dims they bind.
    With `lengths` row b's ids are only its first lengths[b] (the rest right-padding: prompts of several
    lengths prefilled in one run, each row's past the same): its mask hides the padding and its logits come
    from its own last token (`LAST_ROWS`)."""
    sig, batch = signature, len(rows)
    pasts = np.array([row.past for row in rows], np.int64)
    longest = max(row.past for row in rows)
    ends = pasts + count if lengths is None else pasts + np.array(lengths, np.int64)  # each row's keys after the run
    feeds = {sig.input_ids: np.array(ids, np.int64).reshape(batch, count)}
    if sig.attention_mask:
        feeds[sig.attention_mask] = (np.arange(longest + count) < ends[:, None]).astype(np.int64)
    if sig.position_ids:
        feeds[sig.position_ids] = pasts[:, None] if count == 1 else pasts[:, None] + np.arange(count)
    if dims.resident:
        feeds[KV_ROWS] = np.array([(row.slot, row.past) for row in rows], np.int32)
    if dims.last_rows:
        starts = np.arange(0, batch * count, count, dtype=np.int64)  # each row's first id in the run
        feeds[LAST_ROWS] = (starts + (count - 1 if lengths is None else np.array(lengths, np.int64) - 1))[:, None]
    return feeds, dims(count, longest, batch)


class StepDims:
    """The plan dims (`symbols`) a run binds, from its feeds' shapes alone: `(count, past, batch)` gives them
    for `count` ids appended to `batch` rows whose longest cache holds `past` tokens. Which name takes which
    size is worked out once (a pipelined decode step then builds no arrays and walks no signature)."""

    def __init__(
        self, signature: LlmSignature, window: int | None, symbols: Collection[str], inputs: Collection[str] = ()
    ) -> None:
        sig = signature
        self.resident = KV_ROWS in inputs  # the plan reads the `KV_ROWS` table (a resident cache)
        self.last_rows = LAST_ROWS in inputs  # and gathers each row's last position (a batched plan)
        # each feed's and cache's dims, with the size each takes: its shape as `step_feeds` builds it
        sources: list[tuple[tuple[SymbolicDim, ...], tuple[str, ...]]] = [
            (sig.input_dims[sig.input_ids], ("batch", "count"))
        ]
        if sig.attention_mask:
            sources.append((sig.input_dims[sig.attention_mask], ("batch", "total")))
        if sig.position_ids:
            sources.append((sig.input_dims[sig.position_ids], ("batch", "count")))
        for pair in sig.kv:  # [batch, kv heads, past length (a window's capacity), head size]
            sources.append((pair.past_dims[:1], ("batch",)))
            if not pair.windowed or window is not None:
                sources.append((pair.past_dims[2:3], ("window" if pair.windowed else "past",)))
        bound: dict[str, str] = {}
        for dims, sizes in sources:
            for dim, size in zip(dims, sizes):
                if isinstance(dim, SymbolicExpr) and dim.is_name:
                    bound.setdefault(str(dim), size)  # the first binding of a name wins
        self._bound = [(name, size) for name, size in bound.items() if name in symbols]
        self._window = window or 0

    def __call__(self, count: int, past: int, batch: int = 1) -> dict[str, int]:
        sizes = {"batch": batch, "count": count, "total": past + count, "past": past, "window": self._window}
        return {name: sizes[size] for name, size in self._bound}


def checked_token_ids(ids: Sequence[int], vocab: int | None) -> list[int]:
    """`ids` as ints inside the vocabulary, checked here: on the GPU an id past the embedding
    table would read another row (or zeros) and generate from garbage without a word."""
    try:
        tokens = [int(t) for t in ids]
    except (TypeError, ValueError) as e:
        raise InputError(f"token ids must be integers ({e})") from None
    bad = next((t for t in tokens if t < 0 or (vocab is not None and t >= vocab)), None)
    if bad is not None:
        known = f"0 to {vocab - 1}" if vocab is not None else "non-negative"
        raise InputError(f"token id {bad} is outside the vocabulary of {vocab or 'unknown'} tokens (ids are {known})")
    return tokens


def vocab_size(executor: PlanExecutor, logits: str) -> int | None:
    """The logits' last dim (rows of the lm head): the number of token ids the model knows."""
    last = executor.compiled.tensor_by_name(logits).dims[-1]
    return last if isinstance(last, int) else None


def per_row_positions(session: LlmSession) -> bool:
    """Whether a run's rows may have cached different lengths. GroupQueryAttention derives each row's positions
    and window from its seqlens (genai, onnx-community). Other graphs need `position_ids` fed, and no sliding
    window shorter than the cache: their window mask is built from the shared past length, which would hide
    a shorter row's recent keys (optimum's and PyTorch's Mistral, Gemma 2 and 3 exports)."""
    sig = session.signature
    if session.slots == 1 or "GroupQueryAttention" in {op.op_type for op in session.executor.compiled.operations}:
        return True
    config = session.model_dir.config
    window = config.get("sliding_window") if config.get("use_sliding_window", True) is not False else None
    return sig.position_ids is not None and not (window and window < session.max_length)
