"""`LlmSession.generate(constraint=...)`: slot 0's conversation under a grammar, one run per drawn token.

Each run feeds the id drawn last and the ids the grammar forced after it (`GrammarMatcher.advance`: several
tokens in one run, never a decode step each) and draws the next under the mask of the state they leave. It
does not pipeline (`llm/pipelined.py`): the next mask depends on the id this run draws, so the host must read
it before it can submit the next run. The forced ids count as new tokens and in `stats.forced_tokens`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.constrained_rows import allowed_masks, attach_matcher, masked_logits, set_allowed
from onyxia.cli.llm.constraints import Constraint
from onyxia.cli.llm.generation_passes import NEXT_TOKEN
from onyxia.cli.llm.sampling import SamplingParams, gpu_params, on_gpu, sample_token

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession

__all__ = ["constrained_ids"]


def constrained_ids(
    session: LlmSession,
    prompt: list[int],
    max_new_tokens: int,
    params: SamplingParams,
    stop: Sequence[int],
    constraint: Constraint,
) -> Iterator[int]:
    """Token ids as `generate_ids` yields them (a stop id included), every one of them on the grammar."""
    stream = Stream(prompt, max_new_tokens, params, stop, constraint=constraint)
    attach_matcher(session, stream)  # an InputError here, before anything runs
    if max_new_tokens == 0:
        return
    ids, start = prompt, time.perf_counter()
    try:
        while True:
            masks = allowed_masks(session, [stream.matcher])
            set_allowed(session, masks)
            token = _draw(session, ids, params, stream.rng, masks, stream.tokens)
            if len(stream.tokens) == 0:
                session.stats.prefill_seconds = time.perf_counter() - start
                start = time.perf_counter()
            before = len(stream.tokens)
            stream.deliver(token)
            session.stats.new_tokens = len(stream.tokens)
            session.stats.forced_tokens = stream.forced
            session.stats.decode_seconds = time.perf_counter() - start
            yield from stream.tokens[before:]
            if stream.done:
                return
            assert stream.last is not None
            ids, stream.feed = [stream.last, *stream.feed], []
    finally:
        set_allowed(session, None)


def _draw(
    session: LlmSession,
    ids: list[int],
    params: SamplingParams,
    rng: np.random.Generator,
    masks: np.ndarray | None,
    generated: Sequence[int],
) -> int:
    if on_gpu(params):
        session.set_sampling(gpu_params(params, rng))
        return int(session._forward(ids, [NEXT_TOKEN])[NEXT_TOKEN].reshape(-1)[-1])
    logits = session._forward(ids, [session.signature.logits])[session.signature.logits]
    row = logits.reshape(-1, logits.shape[-1])[-1]
    if masks is not None:
        row = masked_logits(row, masks[0])
    return sample_token(row, params, session.history, rng, generated)
