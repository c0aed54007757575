"""`CarriedSteps`: the host side of a batch's pipelined decode steps, each run's feeds moved on from the run before.

While a batch's rows carry over (`Batch._carries`: the same rows, all alive, every draw on the GPU, nobody
waiting or prefilling), step N + 1 feeds each row the token step N drew, carried on the GPU, one position
further on: each row's position id and `KV_ROWS` entry grow by one, `LAST_ROWS` stays, the attention mask
gains a column. So a run of such steps builds its arrays at its first step and moves them on in place,
and leaves alone what its first step's run set for the same rows (the allowed-token masks, the rows whose
log-probabilities are computed, the params of greedy rows): a step's host work stays what a single stream's
is, plus the mask and one SampleToken draw per sampling row. The feeds equal `step_inputs.step_feeds`'s for
the same rows, one token each (test_llm_batch's streams equal their solo runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.llm.generation_passes import LAST_ROWS, NEXT_TOKEN
from onyxia.cli.llm.logprobs import LOGPROBS, asking_rows, select_rows
from onyxia.cli.llm.sampling import gpu_params
from onyxia.core.resident_kv import KV_ROWS

if TYPE_CHECKING:
    from onyxia.cli.llm.batch_stream import Stream
    from onyxia.cli.llm.session import LlmSession
    from onyxia.cli.llm.slot_table import SlotTable
    from onyxia.runtime.pending import PendingRun

__all__ = ["CarriedSteps"]


class CarriedSteps:
    def __init__(self, session: LlmSession, slots: SlotTable) -> None:
        self.session, self.slots = session, slots
        self._streams: list[Stream] | None = None  # the rows of the run of steps in progress
        self._keys = np.arange(session.max_length, dtype=np.int64)  # key positions, for the mask's columns
        self._positions = np.zeros((0, 1), np.int64)  # each row's position this step
        self._kv_rows = np.zeros((0, 2), np.int32)  # `KV_ROWS`: each row's slot and cached length
        self._last_rows = np.zeros((0, 1), np.int64)  # `LAST_ROWS`: one token a row, so row b's own
        self._longest = 0  # the longest row's cached length
        self._draws = np.zeros((0, 3), np.float32)  # SampleToken's params, a row each (greedy rows stay zeros)
        self._sampled: list[tuple[int, Stream]] = []  # the rows that draw at a temperature
        self._wanted = [NEXT_TOKEN]

    def submit(self, streams: list[Stream]) -> PendingRun:
        """Submit the next decode step of `streams` (the list `Batch` keeps for the run of steps: a new list
        starts a new run), its ids carried on the GPU; the slot records take them when they are read."""
        if streams is self._streams:
            self._positions += 1  # every row cached the token the step before fed (`Batch._decode`)
            self._kv_rows[:, 1] += 1
            self._longest += 1
        else:
            self._start(streams)
        for b, stream in self._sampled:
            self._draws[b] = gpu_params(stream.params, stream.rng)
        session, sig, dims = self.session, self.session.signature, self.session.step_dims
        session.set_sampling(self._draws)
        session.executor.update_dimensions(dims(1, self._longest, len(streams)))
        feeds: dict[str, np.ndarray] = {}
        if sig.attention_mask:  # row b sees keys 0 .. its position
            feeds[sig.attention_mask] = (self._keys[: self._longest + 1] <= self._positions).astype(np.int64)
        if sig.position_ids:
            feeds[sig.position_ids] = self._positions
        if dims.resident:
            feeds[KV_ROWS] = self._kv_rows
        if dims.last_rows:
            feeds[LAST_ROWS] = self._last_rows
        return session._run(feeds, self._wanted)

    def _start(self, streams: list[Stream]) -> None:
        rows = self.slots.rows(streams)
        self._streams = streams
        self._kv_rows = np.array(rows, np.int32)
        self._positions = self._kv_rows[:, 1:].astype(np.int64)
        self._last_rows = np.arange(len(rows), dtype=np.int64)[:, None]
        self._longest = max(row.past for row in rows)
        self._draws = np.zeros((len(rows), 3), np.float32)
        self._sampled = [(b, s) for b, s in enumerate(streams) if s.params.temperature > 0.0]
        asked = select_rows(self.session.executor, asking_rows(streams))  # as the run before: written then
        self._wanted = [NEXT_TOKEN, LOGPROBS] if asked else [NEXT_TOKEN]
