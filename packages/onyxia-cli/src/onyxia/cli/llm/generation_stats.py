"""What one generation measured, and the turn that keeps a session to one generation at a time."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from onyxia.core import OnyxiaError

__all__ = ["GenerationStats", "SessionBusyError", "Turn"]


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    new_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    forced_tokens: int = 0  # of new_tokens, those a grammar forced (fed without a decode step each); last: fields
    # keep their positions (a public dataclass: `nox -s api`)

    @property
    def prefill_tokens_per_second(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        return (self.new_tokens - 1) / self.decode_seconds if self.decode_seconds and self.new_tokens > 1 else 0.0


class SessionBusyError(OnyxiaError):
    """A session was asked to generate (or reset) while a generation on it is still open."""


class Turn:
    """Held by the generation in progress: the cache is one conversation's (or one batch's) at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @contextmanager
    def hold(self, caller: str) -> Iterator[None]:
        if not self._lock.acquire(blocking=False):
            raise SessionBusyError(
                f"{caller}: this session is generating (an open generator or another thread); finish or close "
                "that generation first, or give each concurrent conversation its own session (or slot: "
                "`generate_batch`)"
            )
        try:
            yield
        finally:
            self._lock.release()
