"""One conversation's generation on slot 0 (`LlmSession.generate_ids`): pipelined on the GPU when every draw
can be (`pipelined.py`), grammar-constrained through `constrained_generate.py`, else one run per token with
the host sampling top-p and repetition penalties from the logits."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.llm.constrained_rows import set_allowed
from onyxia.cli.llm.constraints import Constraint
from onyxia.cli.llm.generation_stats import GenerationStats
from onyxia.cli.llm.pipelined import can_pipeline, pipelined_decode
from onyxia.cli.llm.request_checks import checked_request
from onyxia.cli.llm.sampling import SamplingParams, gpu_params, on_gpu

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession

__all__ = ["single_stream_ids"]


def single_stream_ids(
    session: LlmSession,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    params: SamplingParams,
    stop: Sequence[int],
    constraint: Constraint | None = None,
) -> Iterator[int]:
    """Token ids as they are produced, the prompt appended to what the cache holds (the caller holds the turn)."""
    prompt = checked_request(session, prompt_ids, max_new_tokens, params, cached=session.position)
    session.stats = GenerationStats(prompt_tokens=len(prompt))
    set_allowed(session, None)  # a constrained batch's last run may have left its masks resident
    if constraint is not None:
        from onyxia.cli.llm.constrained_generate import constrained_ids

        yield from constrained_ids(session, prompt, max_new_tokens, params, stop, constraint)
        return
    rng = np.random.default_rng(params.seed)
    if on_gpu(params) and max_new_tokens and can_pipeline(session):
        yield from pipelined_decode(session, prompt, max_new_tokens, stop, lambda: gpu_params(params, rng))
        return
    start = time.perf_counter()
    token = session._step(prompt, params, rng)
    session.stats.prefill_seconds = time.perf_counter() - start
    decode_start = time.perf_counter()
    generated: list[int] = []  # the presence and frequency penalties' tokens
    for produced in range(max_new_tokens):
        session.stats.new_tokens = produced + 1
        yield token
        generated.append(token)
        if token in stop or produced + 1 == max_new_tokens:
            break
        token = session._step([token], params, rng, generated)
        session.stats.decode_seconds = time.perf_counter() - decode_start
