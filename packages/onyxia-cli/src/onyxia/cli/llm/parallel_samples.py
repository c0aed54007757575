"""`n` parallel samples of one prompt in a batch: the prompt is prefilled once, its cache rows copied to the others.

OpenAI's `n` asks for several answers to one prompt. Each sample is a `Stream` of its own (its own slot, seed
and stop), but prefilling the prompt n times would cost n prefills. Instead the first stream (the leader)
prefills all but the prompt's last token; those rows of every resident KV cache are then copied on the GPU
from its slot into each other sample's slot (`onyxia.runtime.buffer_copy`, queued after the prefill), and all
n feed the last prompt token together in one n-row run, each drawing its first token with its own params. So
every sample starts from the same logits row: greedy samples are n equal answers, and the others differ only
by their draws. The followers count the copied prefix as cached (`Stream.cached`), as a prefix reused from a
slot is. Where the caches are not resident (a copied or shifting window cache) the samples are independent
streams, each prefilling the prompt.

Seeds: `sample_params(params, n)` gives sample i the seed `seed + i` (vLLM's rule), so sample i equals the same
request sent alone with that seed; without a seed each sample draws from fresh entropy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.sampling import SamplingParams
from onyxia.core import InputError

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession
    from onyxia.cli.llm.slot_table import SlotTable

__all__ = ["ParallelSamples", "can_share", "sample_params"]


def sample_params(params: SamplingParams, n: int) -> list[SamplingParams]:
    """The params of samples 0..n-1: seed + i each when a seed is given."""
    return [params if params.seed is None else replace(params, seed=params.seed + i) for i in range(n)]


def can_share(session: LlmSession) -> bool:
    """Whether every KV cache is resident (one [slots, kv heads, capacity, head] buffer): then a slot's rows
    can be copied into another's."""
    resident = {past for past, _ in session.aliased}
    return bool(resident) and all(p.past in resident for p in session.signature.kv) and not session.shifting


class ParallelSamples:
    """The groups of a batch whose followers wait for their leader's prefix (see the module docstring)."""

    def __init__(self, session: LlmSession) -> None:
        self.session = session
        self._followers: dict[Stream, list[Stream]] = {}  # leader -> followers still without the prefix
        self._held: set[Stream] = set()
        self.copied_bytes = 0

    def add(self, streams: Sequence[Stream]) -> None:
        """Register `streams` (checked, same prompt) as one group, the first the leader."""
        leader, followers = streams[0], list(streams[1:])
        if any(s.prompt != leader.prompt for s in followers):
            raise InputError("parallel samples: every stream of a group must have the same prompt")
        if len(streams) > self.session.slots:
            raise InputError(
                f"parallel samples: {len(streams)} samples need as many slots; the session has {self.session.slots}"
            )
        if followers and can_share(self.session):
            self._followers[leader] = followers
            self._held.update(followers)

    def slots_needed(self, stream: Stream) -> int:
        """Free slots `stream`'s admission needs: a leader's group is admitted together."""
        return 1 + len(self._followers.get(stream, ()))

    def prefill_end(self, stream: Stream) -> int:
        """How far `stream`'s prompt may be prefilled now: a held follower not at all, a leader to its last token."""
        if stream in self._held:
            return stream.fed
        if stream in self._followers:
            return len(stream.prompt) - 1
        return len(stream.prompt)

    def share(self, slots: SlotTable) -> None:
        """Give each follower its leader's prefix once the leader has prefilled it (or let the followers prefill
        alone if the leader ended first)."""
        for leader, followers in list(self._followers.items()):
            alive = [f for f in followers if not f.done]
            if leader.done or leader.cancelled:
                self._release(leader, alive)
                continue
            if leader.slot is None or any(f.slot is None for f in alive):
                continue  # not admitted yet
            prefix = leader.prompt[:-1]
            if leader.fed < len(prefix):
                continue
            self.copied_bytes += self._copy(leader.slot, [f.slot for f in alive if f.slot is not None], len(prefix))
            for follower in alive:
                assert follower.slot is not None
                held = slots.history(follower.slot)
                held[:] = prefix
                if follower.slot == 0:
                    self.session.position = len(prefix)
                follower.fed = follower.cached = len(prefix)
            self._release(leader, followers)

    def _release(self, leader: Stream, followers: list[Stream]) -> None:
        del self._followers[leader]
        self._held.difference_update(followers)

    def _copy(self, source: int, targets: list[int], rows: int) -> int:
        """Copy rows [0, rows) of every resident cache from slot `source` to each target slot."""
        from onyxia.runtime.buffer_copy import copy_regions  # the runtime loads with a session, not on import

        session = self.session
        executor, capacity = session.executor, session.max_length
        regions: dict[str, list[tuple[int, int, int]]] = {}
        for pair in session.signature.kv:
            tensor = executor.compiled.tensor_by_name(pair.past)
            kv_heads, head = (
                d if isinstance(d, int) else executor.dims[str(d)] for d in (tensor.dims[1], tensor.dims[3])
            )
            row = head * tensor.dtype.gpu_numpy.itemsize
            block = capacity * row  # one (slot, kv head)'s rows
            regions[pair.past] = [
                ((source * kv_heads + h) * block, (target * kv_heads + h) * block, rows * row)
                for target in targets
                for h in range(kv_heads)
            ]
        return copy_regions(executor, regions) if rows else 0
