"""What one generation measured, and the error a session raises when asked for two at once."""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import OnyxiaError

__all__ = ["GenerationStats", "SessionBusyError"]


@dataclass
class GenerationStats:
    prompt_tokens: int = 0
    new_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0

    @property
    def prefill_tokens_per_second(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        return (self.new_tokens - 1) / self.decode_seconds if self.decode_seconds and self.new_tokens > 1 else 0.0


class SessionBusyError(OnyxiaError):
    """A session was asked to generate (or reset) while a generation on it is still open."""
