"""Decoding with the chosen token kept on the GPU: step N+1 is submitted before step N's token is read.

The plan's SampleToken output (`NEXT_TOKEN`: ArgMax, or a top-k / temperature draw at a uniform number
the host takes from its seeded generator ahead of time) is carried into the input_ids buffer after
every run (`PlanExecutor.carry`), so a decode step needs nothing from the host but what follows from
its position, which the host knows ahead (`step_inputs`), and its draw's params. The host submits
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

from onyxia.cli.llm.generation_passes import NEXT_TOKEN
from onyxia.cli.llm.step_inputs import step_feeds

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
    if NEXT_TOKEN not in executor.output_names or any(pair.windowed for pair in sig.kv):
        return False
    if not session._token_carried:
        executor.carry({sig.input_ids: NEXT_TOKEN})
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
    session.set_sampling(draw())
    pending = session._submit(prompt, [NEXT_TOKEN])
    ahead: PendingRun | None = None
    decode_start = start
    try:
        for produced in range(1, max_new_tokens + 1):
            ahead = _submit_carried(session, draw) if produced < max_new_tokens else None
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


def _submit_carried(session: LlmSession, draw: Callable[[], np.ndarray]) -> PendingRun:
    """Submit one decode step whose token id the GPU carried from the step before."""
    assert session.position < session.max_length, "generate() checked the length up front"
    session.set_sampling(draw())
    feeds, dims = step_feeds(session.signature, [0], session.position, session._window, session._symbols)
    del feeds[session.signature.input_ids]  # resident, written by the carry
    session.executor.update_dimensions(dims)
    pending = session.executor.submit(feeds, outputs=[NEXT_TOKEN])
    session.position += 1
    return pending
