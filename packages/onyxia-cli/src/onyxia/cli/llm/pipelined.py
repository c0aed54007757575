"""Decoding with the chosen token kept on the GPU: step N+1 is submitted before step N's token is read.

The plan's SampleToken output (`NEXT_TOKEN`: ArgMax, or a top-k / temperature draw at a uniform number
the host takes from its seeded generator ahead of time) is carried into the input_ids buffer after
every run (`PlanExecutor.carry`), so a decode step needs nothing from the host but what follows from
its position, which the host knows ahead (`step_inputs.StepDims`), and its draw's params: the
attention mask is resident (all ones, written once), so a step writes one position id. The host submits
step N+1, then reads step N's token while the GPU works, and yields it one step behind. When that token ends the generation
(a stop id, the last token asked for is known not to need a step, or the caller closes the
generator), the step submitted ahead has fed a token unpipelined generation never feeds: it is
read and dropped and the cache position rewound, so the session ends exactly as unpipelined.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.llm.generation_passes import LAST_ROWS, NEXT_TOKEN
from onyxia.cli.llm.step_inputs import StepDims
from onyxia.core.resident_kv import KV_ROWS

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession
    from onyxia.runtime.pending import PendingRun

__all__ = ["can_pipeline", "pipelined_decode"]


def can_pipeline(session: LlmSession) -> bool:
    """Whether steps can run ahead, setting up the carry of the token the first time.

    Not with profiling (runs timed one by one), a plan that reads values back mid-run, or a
    sliding-window cache of fixed capacity (its entries shift, so a step cannot be taken back)."""
    executor, sig = session.executor, session.signature
    if not session.pipelined or session.profiles is not None or executor._host_steps:
        return False
    if NEXT_TOKEN not in executor.output_names or session.shifting:
        return False
    if not session._token_carried:
        executor.carry({sig.input_ids: NEXT_TOKEN})
        if sig.attention_mask:  # all ones up to any length a step can reach: no step writes it again
            executor.write_input(sig.attention_mask, np.ones((1, session.max_length), np.int64))
        session._token_carried = True
    return True


def pipelined_decode(
    session: LlmSession,
    prompt: list[int],
    max_new_tokens: int,
    stop: Sequence[int],
    draw: Callable[[], np.ndarray],
) -> Iterator[int]:
    """`LlmSession._generate_ids` one step ahead (same tokens, same end state); `draw` gives each step's
    SampleToken params in step order, as unpipelined generation takes them."""
    start = time.perf_counter()
    dims = session.step_dims
    session.set_sampling(draw())
    pending = session._submit(prompt, [NEXT_TOKEN])
    ahead: PendingRun | None = None
    decode_start = start
    try:
        for produced in range(1, max_new_tokens + 1):
            ahead = _submit_carried(session, draw, dims) if produced < max_new_tokens else None
            token = int(pending.read()[NEXT_TOKEN].reshape(-1)[-1])
            if produced == 1:
                session.stats.prefill_seconds = time.perf_counter() - start
                decode_start = time.perf_counter()
            else:
                session.stats.decode_seconds = time.perf_counter() - decode_start
            session.stats.new_tokens = produced
            if ahead is not None:
                session.history.append(token)  # what the step submitted ahead consumed
            yield token
            if token in stop or ahead is None:
                break
            pending, ahead = ahead, None
    finally:
        if ahead is not None:  # fed a token unpipelined generation would not: take it back
            ahead.read()
            session.position -= 1
            session.history.pop()


def _submit_carried(session: LlmSession, draw: Callable[[], np.ndarray], dims: StepDims) -> PendingRun:
    """Submit one decode step whose token id the GPU carried from the step before. Its attention
    mask is resident (ones, `can_pipeline`), so the host writes only the position id (and the resident
    cache's row: slot 0 and its length)."""
    assert session.position < session.max_length, "generate() checked the length up front"
    sig, position = session.signature, session.position
    session.set_sampling(draw())
    session.executor.update_dimensions(dims(1, position))
    feeds = {sig.position_ids: np.array([[position]], np.int64)} if sig.position_ids else {}
    if dims.resident:
        feeds[KV_ROWS] = np.array([[0, position]], np.int32)
    if dims.last_rows:  # a batched plan used by one stream: its one row's logits
        feeds[LAST_ROWS] = np.zeros((1, 1), np.int64)
    pending = session.executor.submit(feeds, outputs=[NEXT_TOKEN])
    session.position += 1
    return pending
