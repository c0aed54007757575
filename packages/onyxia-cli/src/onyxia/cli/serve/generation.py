"""One job on the session: reuse the cached prefix, generate, apply stops, stream text deltas.

KV reuse rule: the session's `history` is exactly what its cache holds. A new prompt keeps the
longest common prefix of the two and prefills only the rest, so a client that resends its whole
conversation with one more turn pays for that turn alone. At least one prompt token is always fed
(its logits choose the first new token), and a sliding-window buffer that cannot rewind starts over
(`LlmSession.rewind`). Since the last sampled token of an answer is never fed back, and a chat
template may render an earlier answer's text as other ids, the common prefix, not "everything
cached", is what a request can reuse.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from typing import cast

from onyxia.cli.llm.session import LlmSession
from onyxia.cli.serve.jobs import Finished, Job, TextDelta
from onyxia.cli.serve.stops import StopStrings

__all__ = ["reuse_prefix", "run_job"]


def reuse_prefix(session: LlmSession, prompt: Sequence[int]) -> int:
    """Rewind the session to the longest prefix it shares with `prompt`; returns the tokens kept."""
    held = session.history
    common = next((i for i, (a, b) in enumerate(zip(held, prompt)) if a != b), min(len(held), len(prompt)))
    return session.rewind(min(common, len(prompt) - 1))


def run_job(session: LlmSession, job: Job) -> Finished:
    """Generate for `job`, sending text as it settles; a cancel takes effect after the step running."""
    request = job.request
    cached = reuse_prefix(session, request.prompt)
    steps = cast(  # a generator: closing it frees the session without another step
        Generator[int, None, None],
        session.generate_ids(request.prompt[cached:], request.max_tokens, request.params, sorted(request.stop_ids)),
    )
    decoder, stops = session.tokenizer.stream(), StopStrings(request.stop_strings)
    stopped, first = False, None
    try:
        for token in steps:
            job.produced += 1
            first = first or time.perf_counter()
            if token in request.stop_ids:
                stopped = True
                break
            _send(job, stops.push(decoder.push(token)))
            if stops.hit or job.cancelled.is_set():
                break
    finally:
        steps.close()  # frees the session; the cache holds the prompt and every token fed
    cancelled = job.cancelled.is_set() and not stops.hit
    if not cancelled:
        _send(job, stops.push(decoder.flush()) + stops.flush())
    reason = "cancelled" if cancelled else "stop" if stopped or stops.hit else "length"
    return Finished(
        reason=reason,
        prompt_tokens=len(request.prompt),
        cached_tokens=cached,
        completion_tokens=job.produced,
        time_to_first_token=None if first is None else first - job.admitted,
        decode_tokens_per_second=session.stats.decode_tokens_per_second,
    )


def _send(job: Job, text: str) -> None:
    if text:
        job.emit(TextDelta(text))
