"""Stop strings over streamed text: emit what cannot be the start of a stop, hold back what might be.

A stop string may arrive split over several tokens, so the tail of the text that is a prefix of some
stop is held until the next piece settles it. The stop itself and everything after it are never
sent (OpenAI's rule), and nothing already sent can turn out to have begun a stop.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["StopStrings"]


class StopStrings:
    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(s for s in stops if s)
        self._held = ""
        self.hit = False

    def push(self, piece: str) -> str:
        """The text now safe to send; after a stop (`hit`), only the text before it."""
        if self.hit:
            return ""
        text = self._held + piece
        found = [i for i in (text.find(s) for s in self.stops) if i >= 0]
        if found:
            self.hit, self._held = True, ""
            return text[: min(found)]
        keep = max((_overlap(text, s) for s in self.stops), default=0)
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The held tail at the end of generation: it never completed a stop."""
        held, self._held = self._held, ""
        return "" if self.hit else held


def _overlap(text: str, stop: str) -> int:
    """The length of the longest suffix of `text` that is a proper prefix of `stop`."""
    for size in range(min(len(text), len(stop) - 1), 0, -1):
        if text.endswith(stop[:size]):
            return size
    return 0
