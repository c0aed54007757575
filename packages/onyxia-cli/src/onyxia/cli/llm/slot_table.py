"""`SlotTable`: which stream holds each cache slot, and the tokens each slot's cache holds.

A slot's record outlives its stream: a later request that starts with the same tokens (a client resending its
conversation with one more turn, a shared system prompt) takes the free slot with the longest common prefix and
prefills only the rest. Slot 0's record is the session's own `history` (and `position`), so
`LlmSession.generate()` and a batch can take turns on one session and see the same cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.step_inputs import Row

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession

__all__ = ["SlotTable"]


class SlotTable:
    def __init__(self, session: LlmSession) -> None:
        self.session = session
        self._histories: list[list[int]] = [[] for _ in range(session.slots)]  # slot 0's is the session's
        self._owners: list[Stream | None] = [None] * session.slots

    def history(self, slot: int) -> list[int]:
        """The tokens slot `slot`'s cache holds, in order."""
        return self.session.history if slot == 0 else self._histories[slot]

    def length(self, stream: Stream) -> int:
        assert stream.slot is not None, "a stream holds a slot from admission to its end"
        return len(self.history(stream.slot))

    def rows(self, streams: Sequence[Stream]) -> list[Row]:
        """Each stream's run row: its slot and the tokens that slot holds."""
        histories, held = self._histories, self.session.history
        return [Row(s.slot or 0, len(histories[s.slot] if s.slot else held)) for s in streams]

    def append(self, stream: Stream, ids: Sequence[int]) -> None:
        """Record that a run wrote `ids` after the tokens `stream`'s slot held."""
        assert stream.slot is not None
        self.history(stream.slot).extend(ids)
        if stream.slot == 0:
            self.session.position += len(ids)

    @property
    def free(self) -> bool:
        return None in self._owners

    @property
    def in_use(self) -> int:
        return sum(owner is not None for owner in self._owners)

    @property
    def cached(self) -> int:
        """Slots whose cache holds tokens (a stream's, or a prefix kept for a later request)."""
        return sum(bool(self.history(slot)) for slot in range(self.session.slots))

    def take(self, stream: Stream) -> None:
        """Give `stream` the free slot sharing the longest prefix with its prompt (at most all but its last
        token, whose logits pick the first new token; the lowest such slot on ties) and keep that prefix."""
        best, common = -1, -1
        prompt = stream.prompt
        for slot, owner in enumerate(self._owners):
            if owner is not None:
                continue
            held = self.history(slot)
            limit = min(len(held), len(prompt) - 1)
            shared = next((i for i in range(limit) if held[i] != prompt[i]), limit)
            if shared > common:
                best, common = slot, shared
        del self.history(best)[common:]
        if best == 0:
            self.session.position = common
        stream.slot, stream.cached, stream.fed = best, common, common
        self._owners[best] = stream

    def forget(self, stream: Stream) -> None:
        """Drop the prefix `stream` kept in its slot: its prompt is prefilled from the start."""
        assert stream.slot is not None
        del self.history(stream.slot)[:]
        if stream.slot == 0:
            self.session.position = 0
        stream.cached = stream.fed = 0

    def release(self, stream: Stream) -> None:
        if stream.slot is not None and self._owners[stream.slot] is stream:
            self._owners[stream.slot] = None
        stream.slot = None
