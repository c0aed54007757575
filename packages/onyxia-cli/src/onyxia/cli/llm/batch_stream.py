"""`Stream`: one sequence of a continuous batch — what it asks for and what it has produced so far.

A stream crosses threads: the caller makes it and may `cancel()` it or read `tokens` from anywhere; only the
thread stepping its `Batch` feeds and samples it. `on_token` runs on that thread for every sampled id (a
stop id included), before the stream is marked finished, so a server can forward each token as it comes.

A stream with a `constraint` (`llm/constraints.py`) follows it with a `GrammarMatcher` (the batch builds it
when the stream is added): each drawn id is consumed, the ids the grammar then forces are delivered at once
(`forced` counts them; the batch feeds them with the drawn id in one run, `feed`), and once the grammar is
complete the stream finishes with "stop" without drawing an end-of-sequence id.

With `logprobs` (None: off; k: the token's log-probability and its row's k best, `llm/logprobs.py`) each
token's `TokenLogprob` is appended to `token_logprobs` before `on_token` runs, so the callback can send both.
A stream asking for both draws the grammar's forced ids one step each (the mask then allows one id), so every
token has the log-probability the model gave it: fast-forwarded ids were never scored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from onyxia.cli.llm.constraints import Constraint, GrammarMatcher
from onyxia.cli.llm.logprobs import TokenLogprob
from onyxia.cli.llm.sampling import SamplingParams

__all__ = ["Stream"]

GREEDY = SamplingParams()


class Stream:
    def __init__(
        self,
        prompt: Sequence[int],
        max_new_tokens: int,
        params: SamplingParams = GREEDY,
        stop: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
        constraint: Constraint | None = None,
        logprobs: int | None = None,
    ) -> None:
        self.prompt = list(prompt)
        self.max_new_tokens = max_new_tokens
        self.params = params
        self.stop = frozenset(stop)
        self.on_token = on_token
        self.tokens: list[int] = []  # every sampled id, a stop id included
        self.logprobs = logprobs  # None: off; k >= 0: each token's log-probability and the k best (checked on add)
        self.token_logprobs: list[TokenLogprob] = []  # parallel to `tokens` when `logprobs` is set
        self.finish_reason: str | None = None  # "stop" | "length" | "cancelled", once finished
        self.cached = 0  # prompt tokens its slot's cache already held (not prefilled)
        self.slot: int | None = None  # while it holds one
        self.submitted = time.perf_counter()
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self.rng = np.random.default_rng(params.seed)  # one per stream: its draws do not depend on the others
        self.fed = 0  # prompt tokens in the cache
        self.last: int | None = None  # the sampled token not fed yet (the next decode step feeds it)
        self.constraint = constraint
        self.matcher: GrammarMatcher | None = None  # set when added to a batch (checked there)
        self.feed: list[int] = []  # forced ids to feed after `last`, in the same run
        self.forced = 0  # tokens the grammar forced (delivered without being drawn)
        # plain flags, read several times per row and step by the stepping thread; `_done` wakes `wait()`
        self.done = False  # finished (`finish_reason` says why); set only by the stepping thread
        self.cancelled = False  # asked to stop (`cancel()`, from any thread)
        self._done = threading.Event()

    def cancel(self) -> None:
        """Stop at the next step (the slot is freed then); a stream still waiting never starts."""
        self.cancelled = True

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the stream finishes (another thread steps the batch); whether it did within `timeout`."""
        return self._done.wait(timeout)

    @property
    def decode_tokens_per_second(self) -> float:
        """Tokens after the first per second of decoding (0 before a second token)."""
        if self.first_token_at is None or len(self.tokens) < 2:
            return 0.0
        end = self.finished_at or time.perf_counter()
        return (len(self.tokens) - 1) / max(end - self.first_token_at, 1e-9)

    # ----- driven by the batch ---------------------------------------------------------------
    def deliver(self, token: int, logprob: TokenLogprob | None = None) -> None:
        """Record a sampled id: it ends the stream (a stop id, the last token asked for) or waits to be fed."""
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()
        if logprob is not None:
            self.token_logprobs.append(logprob)
        if not self._record(token):
            return
        self.last = token
        if self.matcher is None:
            return
        forced = self.matcher.advance(token, fast_forward=self.logprobs is None)
        forced = forced[: self.max_new_tokens - len(self.tokens)]
        for forced_id in forced:
            self.forced += 1
            if not self._record(forced_id):
                return
        self.feed = forced
        if self.matcher.complete:
            self.finish("stop")

    def _record(self, token: int) -> bool:
        """Append a produced id; whether the stream goes on after it."""
        self.tokens.append(token)
        if self.on_token is not None:
            self.on_token(token)
        if token in self.stop:
            self.finish("stop")
        elif len(self.tokens) >= self.max_new_tokens:
            self.finish("length")
        return not self.done

    def finish(self, reason: str) -> None:
        self.finish_reason = reason
        self.finished_at = time.perf_counter()
        self.last = None
        self.feed = []
        self.done = True
        self._done.set()
