"""`Batch`: continuous batching over a session's slots — every decoding sequence advances in one plan run.

Decode reads every weight once per step whatever the number of rows, so a step that advances 8 sequences
costs little more than one that advances 1. Each `step()`:

1. drops cancelled streams (their slots free at once) and admits waiting ones into free slots, each into
   the free slot whose cached tokens share the longest prefix with its prompt (a multi-turn client, a
   shared system prompt): only the rest of the prompt is prefilled;
2. prefills one chunk (`LlmSession.prefill_chunk` tokens) of the oldest stream still prefilling, as a
   one-row run into its slot — so a running stream waits at most one chunk for a newcomer; newcomers whose
   whole prompts fit one chunk together (and whose slots hold the same number of tokens, mostly none) are
   prefilled in one run, right-padded, each row's logits taken at its own last token, so eight clients
   arriving at once all get their first token after one chunk; newcomers whose slots kept prefixes of
   different lengths give them up to share that run when more of them fit it so;
3. runs one decode step for every stream that has a sampled token to feed, and for every newcomer with one
   prompt token left (its slot kept the rest: a client resending its conversation, a group of samples), which
   draws its first token there: row b feeds its id into slot
   `stream.slot` at that slot's length, with its own mask, positions and sampling params
   (`step_inputs.step_feeds`; SampleToken draws per row; top-p and repetition penalties on the host
   from the logits rows).

Decode is pipelined as a lone stream's is (`llm/pipelined.py`): while the rows stay the same (nobody waits
for a free slot or prefills, every row samples on the GPU), step N + 1 is submitted with the tokens step N
drew carried into input_ids on the GPU, before step N's tokens are read, its feeds moved on in place from
step N's (`llm/carried_steps.py`). A row that ends on step N's token has fed it to step N + 1 (its cache
holds it, its slot's record says so) and that row's draw is dropped.

Graphs that derive positions or a sliding window from the past length alone (optimum and PyTorch exports
without `position_ids`, or with a window shorter than the cache) cannot give rows of different lengths
their own: there a step advances the largest group of streams of equal length (`per_row_positions`). Slot
records (`slot_table`) outlive their streams, for the next request's prefix.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.carried_steps import CarriedSteps
from onyxia.cli.llm.constrained_rows import allowed_masks, attach_matcher, masked_logits, set_allowed
from onyxia.cli.llm.generation_passes import NEXT_TOKEN
from onyxia.cli.llm.logprobs import LOGPROBS, TokenLogprob, asking_rows, check_logprobs, row_logprobs, select_rows
from onyxia.cli.llm.parallel_samples import ParallelSamples
from onyxia.cli.llm.pipelined import can_pipeline
from onyxia.cli.llm.prefill_groups import one_token_riders, prefill_group
from onyxia.cli.llm.request_checks import checked_request
from onyxia.cli.llm.sampling import gpu_rows, on_gpu, sample_token
from onyxia.cli.llm.slot_table import SlotTable
from onyxia.cli.llm.step_inputs import per_row_positions, step_feeds

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession
    from onyxia.runtime.pending import PendingRun

__all__ = ["Batch", "Stream"]


def _none() -> bool:
    return False


class Batch:
    def __init__(self, session: LlmSession) -> None:
        self.session = session
        self.slots = SlotTable(session)
        self.waiting: deque[Stream] = deque()
        self.running: list[Stream] = []  # in admission order
        self.per_row_positions = per_row_positions(session)
        self.steps = 0  # decode steps run
        self.last_batch_size = 0  # rows of the last decode step
        self._ahead: tuple[list[Stream], PendingRun] | None = None  # a decode run submitted, its tokens unread
        self._masks: np.ndarray | None = None  # the allowed-token masks of the last sampling run (None: all ones)
        self.samples = ParallelSamples(session)  # groups of `n` samples sharing a prefilled prompt
        self._carried = CarriedSteps(session, self.slots)  # the feeds of decode steps submitted ahead
        # whether requests wait outside the batch for its next step (a server's queue, `serve/engine.py`): a
        # step is then not run ahead, so they are admitted at the next step rather than one step later
        self.arrivals: Callable[[], bool] = _none
        can_pipeline(session)  # sets up the token carry now: a run only carries what was set up before it ran

    # ----- what callers use --------------------------------------------------------------------
    def add(self, stream: Stream) -> Stream:
        """Queue `stream` (checked now: a bad request fails here, not inside a step)."""
        self.waiting.append(self._checked(stream))
        return stream

    def add_parallel(self, streams: Sequence[Stream]) -> list[Stream]:
        """Queue samples of one prompt (`llm/parallel_samples.py`): admitted together, the prompt prefilled once."""
        checked = [self._checked(s) for s in streams]
        self.samples.add(checked)
        self.waiting.extend(checked)
        return checked

    def _checked(self, stream: Stream) -> Stream:
        session = self.session
        stream.prompt = checked_request(session, stream.prompt, stream.max_new_tokens, stream.params)
        check_logprobs(stream.logprobs)
        attach_matcher(session, stream)
        return stream

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running)

    def step(self) -> bool:
        """One scheduling step (see the module docstring); whether any stream is left unfinished."""
        with self.session._turn.hold("a batch step"):
            self._drop_cancelled()
            self._admit()
            self.samples.share(self.slots)
            if self._ahead is None:
                prefilling = [s for s in self.running if s.fed < self.samples.prefill_end(s)]
                riders = one_token_riders(self, prefilling)
                prefilling = [s for s in prefilling if s not in riders]
                if prefilling:
                    self._prefill(prefill_group(self, prefilling))
                for stream in [s for s in self.running if s.feed and not s.done]:
                    self._feed_forced(stream)
                decoding = [s for s in self.running if s.last is not None and not s.feed]
                if decoding or riders:
                    rows = self._group(decoding) if decoding else []
                    fed = [[s.last] for s in rows if s.last is not None] + [[s.prompt[s.fed]] for s in riders]
                    self._ahead = (rows + riders, self._submit(rows + riders, fed))
                    for stream in riders:
                        stream.fed += 1
            if self._ahead is not None:
                self._decode()
            self.running = [s for s in self.running if not s.done]
            if not self.running:
                select_rows(self.session.executor, [])  # runs outside a batch compute no log-probabilities
        return self.busy

    def run(self) -> None:
        """Step until every stream has finished."""
        while self.step():
            pass

    # ----- scheduling --------------------------------------------------------------------------
    def _drop_cancelled(self) -> None:
        for stream in [s for s in self.waiting if s.cancelled]:
            self.waiting.remove(stream)
            stream.finish("cancelled")
        for stream in self.running:
            if stream.cancelled and not stream.done:
                stream.finish("cancelled")
                self.slots.release(stream)
        self.running = [s for s in self.running if not s.done]  # none of them is prefilled or fed again

    def _admit(self) -> None:
        while self.waiting and self.slots.free and self._ahead is None:
            if self.session.slots - self.slots.in_use < self.samples.slots_needed(self.waiting[0]):
                break  # a group of samples waits for a slot each
            stream = self.waiting.popleft()
            if stream.max_new_tokens == 0:
                stream.finish("length")
                continue
            self.slots.take(stream)
            self.running.append(stream)

    def _group(self, decoding: list[Stream]) -> list[Stream]:
        """The rows of one decode step: all, or where positions follow the shared past length, the largest
        group of equal lengths (the longest-waiting group first on ties)."""
        if self.per_row_positions:
            return decoding
        groups: dict[int, list[Stream]] = {}
        for stream in decoding:
            groups.setdefault(self.slots.length(stream), []).append(stream)
        return max(groups.values(), key=len)

    def _carries(self, rows: list[Stream]) -> bool:
        """Whether the next decode step can run ahead on these rows: the same rows (all alive, each the only
        one decoding besides them), nobody to admit or prefill, every draw on the GPU; and none whose token
        being read is its first or, by its length, its last. wgpu-py resolves a read once the whole queue
        is idle, so a run read with a step submitted ahead of it comes back when that step ends too: a first
        token would reach its client a step later (Gemma 3 270m, 8 rows: 197 ms against 100), and a step run
        past every row's last token holds the next requests' admission for a run."""
        alive = all(
            not s.done
            and not s.cancelled
            and on_gpu(s.params)
            and s.matcher is None
            and 0 < len(s.tokens) < s.max_new_tokens - 1
            for s in rows
        )
        others = len(self.running) != len(rows) or ((self.waiting or self.arrivals()) and self.slots.free)
        return alive and not others and can_pipeline(self.session)

    # ----- runs --------------------------------------------------------------------------------
    def _prefill(self, streams: list[Stream]) -> None:
        chunk = self.session.prefill_chunk
        parts = [s.prompt[s.fed : min(s.fed + chunk, self.samples.prefill_end(s))] for s in streams]
        count = max(len(part) for part in parts)
        padded = [part + [part[-1]] * (count - len(part)) for part in parts]  # the padding is masked out
        last = all(s.fed + len(part) == len(s.prompt) for s, part in zip(streams, parts))
        pending = self._submit(streams, padded, sample=last, lengths=[len(part) for part in parts])
        for stream, part in zip(streams, parts):
            stream.fed += len(part)
        if not last:
            pending.read()
            return
        for stream, (token, logprob) in zip(streams, self._tokens(streams, pending)):
            stream.deliver(token, logprob)
            if stream.done:
                self.slots.release(stream)

    def _feed_forced(self, stream: Stream) -> None:
        """Feed a constrained stream's drawn id and the ids its grammar forced after it in one run of its own
        (rows of one decode step feed one id each), and draw the next."""
        assert stream.last is not None
        ids, stream.feed, stream.last = [stream.last, *stream.feed], [], None
        ((token, logprob),) = self._tokens([stream], self._submit([stream], [ids]))
        stream.deliver(token, logprob)
        if stream.done:
            self.slots.release(stream)

    def _decode(self) -> None:
        """Read the decode run in flight, having submitted the next one first when the rows carry over."""
        assert self._ahead is not None
        rows, pending = self._ahead
        self._ahead = None
        ahead = self._carried.submit(rows) if self._carries(rows) else None
        tokens = self._tokens(rows, pending)
        self.steps += 1
        self.last_batch_size = len(rows)
        for stream, (token, logprob) in zip(rows, tokens):
            if stream.done:  # ended on the token the step before drew; this draw went to a run it left
                continue
            stream.deliver(token, logprob)
            if ahead is not None:  # the run ahead fed the token: the slot's cache holds it
                self.slots.append(stream, [token])
                stream.last = None
            if stream.done:
                self.slots.release(stream)
        if ahead is not None:
            self._ahead = (rows, ahead)

    def _submit(
        self,
        streams: Sequence[Stream],
        ids: list[list[int]],
        sample: bool = True,
        lengths: list[int] | None = None,
    ) -> PendingRun:
        """Append `ids[b]` to stream b's slot in one run (`lengths`: the real ids of each padded row); the slot
        records take the ids now (a step submitted ahead, `CarriedSteps`, feeds ids the GPU carried: they are
        recorded when read, in `_decode`)."""
        session, sig = self.session, self.session.signature
        rows = self.slots.rows(streams)
        if sample:
            session.set_sampling(gpu_rows((s.params, s.rng) for s in streams))
            self._masks = allowed_masks(session, [s.matcher for s in streams])
            set_allowed(session, self._masks)
        count = len(ids[0])
        feeds, dims = step_feeds(sig, rows, ids, count, session.step_dims, lengths)
        session.executor.update_dimensions(dims)
        on_host = sample and any(not on_gpu(s.params) for s in streams)
        wanted = ([sig.logits, NEXT_TOKEN] if on_host else [NEXT_TOKEN]) if sample else []
        if select_rows(session.executor, asking_rows(streams) if sample else []):
            wanted.append(LOGPROBS)
        pending = session._run(feeds, wanted)
        for b, (stream, row_ids) in enumerate(zip(streams, ids)):
            self.slots.append(stream, row_ids if lengths is None else row_ids[: lengths[b]])
        return pending

    def _tokens(self, streams: Sequence[Stream], pending: PendingRun) -> list[tuple[int, TokenLogprob | None]]:
        """Each row's token (drawn on the GPU, or on the host from its logits row) and its logprobs if asked.
        Log-probabilities come from the raw logits; the rows the host samples see the mask the GPU applied."""
        sig, result = self.session.signature, pending.read()
        drawn: list[int] = result[NEXT_TOKEN].reshape(-1).tolist()
        logits = result[sig.logits].reshape(len(streams), -1) if sig.logits in result else None
        for b, s in enumerate(streams):
            if logits is not None and not on_gpu(s.params):
                row = logits[b] if self._masks is None else masked_logits(logits[b], self._masks[b])
                drawn[b] = sample_token(row, s.params, self.slots.history(s.slot or 0), s.rng, s.tokens)
        return list(zip(drawn, row_logprobs(streams, drawn, result, logits)))
