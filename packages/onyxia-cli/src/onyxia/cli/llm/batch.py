"""`Batch`: continuous batching over a session's slots — every decoding sequence advances in one plan run.

Decode reads every weight once per step whatever the number of rows, so a step that advances 8 sequences
costs little more than one that advances 1. Each `step()`:

1. drops cancelled streams (their slots free at once) and admits waiting ones into free slots, each into
   the free slot whose cached tokens share the longest prefix with its prompt (a multi-turn client, a
   shared system prompt): only the rest of the prompt is prefilled;
2. prefills one chunk (`LlmSession.prefill_chunk` tokens) of the oldest stream still prefilling, as a
   one-row run into its slot — so a running stream waits at most one chunk for a newcomer;
3. runs one decode step for every stream that has a sampled token to feed: row b feeds it into slot
   `stream.slot` at that slot's length, with its own mask, positions and sampling params
   (`step_inputs.step_feeds`; SampleToken draws per row; top-p and repetition penalties on the host
   from the logits rows).

Graphs that derive positions from the past length alone (an optimum export without `position_ids` and
without GroupQueryAttention's per-row seqlens) cannot give rows of different lengths their own positions:
there a step advances the largest group of streams of equal length (`per_row_positions`). Slot 0's record is
the session's own history, so `generate()` and a batch can take turns on one session.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from onyxia.cli.llm.batch_stream import Stream
from onyxia.cli.llm.generation_passes import NEXT_TOKEN
from onyxia.cli.llm.sampling import SamplingParams, gpu_params, on_gpu, sample_token
from onyxia.cli.llm.step_inputs import Row, step_feeds
from onyxia.core import InputError

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession

__all__ = ["Batch", "Stream", "generate_batch"]

_GREEDY_ROW = np.zeros(3, np.float32)


class Batch:
    def __init__(self, session: LlmSession) -> None:
        self.session = session
        self._histories: list[list[int]] = [[] for _ in range(session.slots)]  # slot 0's is the session's
        self._owners: list[Stream | None] = [None] * session.slots
        self.waiting: deque[Stream] = deque()
        self.running: list[Stream] = []  # in admission order
        self.per_row_positions = _per_row_positions(session)
        self.steps = 0  # decode steps run
        self.last_batch_size = 0  # rows of the last decode step

    # ----- what callers use --------------------------------------------------------------------
    def add(self, stream: Stream) -> Stream:
        """Queue `stream` (checked now: a bad request fails here, not inside a step)."""
        session = self.session
        stream.params.validate()
        n = stream.max_new_tokens
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise InputError(f"generate(): max_new_tokens is {n!r}; expected an integer >= 0")
        stream.prompt = session._token_ids(stream.prompt)
        if not stream.prompt:
            raise InputError("generate(): the prompt has no tokens")
        if len(stream.prompt) + n > session.max_length:
            raise InputError(
                f"generate(): {len(stream.prompt)} prompt + {n} new tokens exceed max_length {session.max_length} "
                "(per sequence); shorten the prompt or raise max_length"
            )
        self.waiting.append(stream)
        return stream

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def slots_in_use(self) -> int:
        return sum(owner is not None for owner in self._owners)

    @property
    def slots_cached(self) -> int:
        """Slots whose cache holds tokens (running, or kept for a later request's prefix)."""
        return sum(bool(self.history(slot)) for slot in range(self.session.slots))

    def step(self) -> bool:
        """One scheduling step (see the module docstring); whether any stream is left unfinished."""
        with self.session._turn.hold("a batch step"):
            self._drop_cancelled()
            self._admit()
            prefilling = next((s for s in self.running if s.fed < len(s.prompt)), None)
            if prefilling is not None:
                self._prefill(prefilling)
            decoding = [s for s in self.running if s.last is not None]
            if decoding:
                self._decode(self._group(decoding))
            self.running = [s for s in self.running if not s.done]
        return self.busy

    def run(self) -> None:
        """Step until every stream has finished."""
        while self.step():
            pass

    # ----- slots -------------------------------------------------------------------------------
    def history(self, slot: int) -> list[int]:
        """The tokens slot `slot`'s cache holds, in order."""
        return self.session.history if slot == 0 else self._histories[slot]

    def _drop_cancelled(self) -> None:
        for stream in [s for s in self.waiting if s.cancelled]:
            self.waiting.remove(stream)
            stream.finish("cancelled")
        for stream in self.running:
            if stream.cancelled and not stream.done:
                stream.finish("cancelled")
                self._release(stream)

    def _admit(self) -> None:
        while self.waiting and None in self._owners:
            stream = self.waiting.popleft()
            if stream.max_new_tokens == 0:
                stream.finish("length")
                continue
            slot, common = self._best_slot(stream.prompt)
            self._truncate(slot, common)
            stream.slot, stream.cached, stream.fed = slot, common, common
            self._owners[slot] = stream
            self.running.append(stream)

    def _best_slot(self, prompt: list[int]) -> tuple[int, int]:
        """The free slot sharing the longest prefix with `prompt` (at most all but its last token, whose
        logits pick the first new token), and that prefix's length; the lowest such slot on ties."""
        best, best_common = -1, -1
        for slot, owner in enumerate(self._owners):
            if owner is not None:
                continue
            held = self.history(slot)
            limit = min(len(held), len(prompt) - 1)
            common = next((i for i in range(limit) if held[i] != prompt[i]), limit)
            if common > best_common:
                best, best_common = slot, common
        return best, best_common

    def _truncate(self, slot: int, length: int) -> None:
        del self.history(slot)[length:]
        if slot == 0:
            self.session.position = length

    def _release(self, stream: Stream) -> None:
        if stream.slot is not None and self._owners[stream.slot] is stream:
            self._owners[stream.slot] = None
        stream.slot = None

    def _group(self, decoding: list[Stream]) -> list[Stream]:
        """The rows of one decode step: all, or where positions follow the shared past length, the largest
        group of equal lengths (the longest-waiting group first on ties)."""
        if self.per_row_positions:
            return decoding
        groups: dict[int, list[Stream]] = {}
        for stream in decoding:
            groups.setdefault(len(self.history(stream.slot or 0)), []).append(stream)
        return max(groups.values(), key=len)

    # ----- runs --------------------------------------------------------------------------------
    def _prefill(self, stream: Stream) -> None:
        assert stream.slot is not None
        chunk = stream.prompt[stream.fed : stream.fed + self.session.prefill_chunk]
        last = stream.fed + len(chunk) == len(stream.prompt)
        tokens = self._run([stream], [chunk], sample=last)
        stream.fed += len(chunk)
        if last:
            stream.deliver(tokens[0])
            if stream.done:
                self._release(stream)

    def _decode(self, streams: list[Stream]) -> None:
        fed = [stream.last for stream in streams]
        tokens = self._run(streams, [[token] for token in fed if token is not None], sample=True)
        self.steps += 1
        self.last_batch_size = len(streams)
        for stream, token in zip(streams, tokens):
            stream.deliver(token)
            if stream.done:
                self._release(stream)

    def _run(self, streams: Sequence[Stream], ids: list[list[int]], sample: bool) -> list[int]:
        """Append `ids[b]` to stream b's slot in one run; the token each row samples (none unless `sample`)."""
        session, sig = self.session, self.session.signature
        rows = [Row(s.slot or 0, len(self.history(s.slot or 0))) for s in streams]
        count = len(ids[0])
        on_host = sample and any(not on_gpu(s.params) for s in streams)
        if sample:
            draws = [gpu_params(s.params, s.rng) if on_gpu(s.params) else _GREEDY_ROW for s in streams]
            session.set_sampling(np.stack(draws))
        feeds, dims = step_feeds(sig, rows, ids, count, session.step_dims)
        session.executor.update_dimensions(dims)
        wanted = ([sig.logits, NEXT_TOKEN] if on_host else [NEXT_TOKEN]) if sample else []
        result = session._run(feeds, wanted).read()
        for stream, row_ids in zip(streams, ids):
            self.history(stream.slot or 0).extend(row_ids)
            if stream.slot == 0:
                session.position += len(row_ids)
        if not sample:
            return []
        drawn = [int(t) for t in result[NEXT_TOKEN].reshape(-1)]
        if not on_host:
            return drawn
        logits = result[sig.logits].reshape(len(streams), -1)
        return [
            drawn[b] if on_gpu(s.params) else sample_token(logits[b], s.params, self.history(s.slot or 0), s.rng)
            for b, s in enumerate(streams)
        ]


def generate_batch(
    session: LlmSession,
    prompts: Sequence[str | Sequence[int]],
    max_new_tokens: int,
    params: SamplingParams | Sequence[SamplingParams],
    stop: Sequence[int] | None,
) -> list[list[int]]:
    """`LlmSession.generate_batch`: one stream per prompt, stepped until all finish."""
    many = list(params) if isinstance(params, Sequence) else [params] * len(prompts)
    if len(many) != len(prompts):
        raise InputError(f"generate_batch(): {len(prompts)} prompts but {len(many)} sampling params")
    stops = session.model_dir.eos_token_ids if stop is None else list(stop)
    batch = Batch(session)
    streams = [
        batch.add(Stream(session.tokenizer.encode(p) if isinstance(p, str) else p, max_new_tokens, sp, stops))
        for p, sp in zip(prompts, many)
    ]
    batch.run()
    return [s.tokens for s in streams]


def _per_row_positions(session: LlmSession) -> bool:
    """Whether a run's rows may have cached different lengths: positions are fed (position_ids) or
    GroupQueryAttention derives them per row (its seqlens_k), as the genai and onnx-community graphs do."""
    sig = session.signature
    if sig.position_ids is not None or session.slots == 1:
        return True
    graph_ops = {op.op_type for op in session.executor.compiled.operations}
    return "GroupQueryAttention" in graph_ops
