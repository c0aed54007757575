"""What a request asks of the worker, and what the worker sends back while it runs.

A `Job` crosses threads: the HTTP side builds it and reads its events, the engine's worker thread
fills them in. Events go through the `sink` the HTTP side gave (for the app, a hop onto its event
loop), so this module knows nothing of asyncio or HTTP.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from onyxia.cli.llm.constraints import Constraint
from onyxia.cli.llm.logprobs import TokenLogprob
from onyxia.cli.llm.sampling import SamplingParams

__all__ = ["Event", "Failed", "Finished", "GenerationRequest", "Job", "TextDelta"]


@dataclass(frozen=True)
class GenerationRequest:
    """A request already checked against the model: ids in the vocabulary, room within max_length."""

    prompt: list[int]
    max_tokens: int
    params: SamplingParams
    stop_ids: frozenset[int]
    stop_strings: tuple[str, ...] = ()
    keep_special: frozenset[int] = frozenset()  # special tokens whose text the answer keeps (tool-call markers)
    constraint: Constraint | None = None  # response_format / guided_*: checked against the model already
    n: int = 1  # parallel samples (choices), sample i seeded seed + i (`llm/parallel_samples.py`)
    logprobs: int | None = None  # None: off; k: each token's log-probability and its k best


@dataclass(frozen=True)
class TextDelta:
    text: str
    index: int = 0  # the choice (sample) it belongs to
    logprobs: tuple[TokenLogprob, ...] = ()  # of the tokens this delta completes, when the request asked


@dataclass(frozen=True)
class Finished:
    reason: str  # "stop" | "length" | "cancelled"
    prompt_tokens: int
    cached_tokens: int  # prompt tokens the KV cache already held (not prefilled)
    completion_tokens: int  # every token sampled, a stop token included
    time_to_first_token: float | None  # seconds from admission (queue wait included)
    decode_tokens_per_second: float
    index: int = 0  # the choice (sample) it ends; a job with n samples ends after n of these


@dataclass(frozen=True)
class Failed:
    error: BaseException


Event = TextDelta | Finished | Failed


class Job:
    def __init__(self, request: GenerationRequest, sink: Callable[[Event], None]) -> None:
        self.request = request
        self._sink = sink
        self.cancelled = threading.Event()
        self.admitted = time.perf_counter()
        self.produced = 0  # tokens sampled so far (the worker writes, anyone may read)

    def emit(self, event: Event) -> None:
        try:
            self._sink(event)
        except RuntimeError:  # the reader's event loop is gone: nobody is listening any more
            self.cancelled.set()

    def cancel(self) -> None:
        """Stop after the decode step in progress (or before starting, if still queued)."""
        self.cancelled.set()
