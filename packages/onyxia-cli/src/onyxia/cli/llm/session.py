"""`LlmSession`: one compiled plan per model, prefill and decode by patching dims, KV cache on the GPU.

Prefill and every decode step run the same plan; only `update_dimensions()` differs (batch, sequence,
past and total lengths), so no shader or pipeline is created after the first step. The cache never
visits the host: each cache is one resident buffer of `slots` sequences that present.N.* shares with
past_key_values.N.* (`resident_cache`), so a step writes only its new rows. A step reads back one
token id per row (drawn on the GPU) or, for top-p and repetition penalties, the logits rows.
`generate` continues slot 0's conversation; `generate_batch` / `batch()` run many at once (`batch`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self

import numpy as np

from onyxia.cli.llm.constraints import Constraint
from onyxia.cli.llm.generation_passes import NEXT_TOKEN, SAMPLING
from onyxia.cli.llm.generation_stats import GenerationStats, SessionBusyError, Turn
from onyxia.cli.llm.model_dir import ModelDirectory
from onyxia.cli.llm.sampling import SamplingParams, gpu_params, on_gpu, sample_token
from onyxia.cli.llm.signature import LlmSignature
from onyxia.cli.llm.single_stream import single_stream_ids
from onyxia.cli.llm.step_inputs import Row, StepDims, checked_token_ids, step_feeds, vocab_size
from onyxia.cli.llm.tokenizer import TextTokenizer
from onyxia.core import InputError

if TYPE_CHECKING:  # the runtime (wgpu) loads when a session is built, not when this module is imported
    from onyxia.cli.llm.batch import Batch
    from onyxia.runtime import PlanExecutor, Runtime
    from onyxia.runtime.pending import PendingRun
    from onyxia.runtime.profiling import RunProfile

__all__ = ["GenerationStats", "LlmSession", "SessionBusyError"]

log = logging.getLogger(__name__)

Progress = Callable[[str], None]
GREEDY = SamplingParams()


class LlmSession:
    def __init__(
        self,
        model_dir: ModelDirectory,
        tokenizer: TextTokenizer,
        executor: PlanExecutor,
        signature: LlmSignature,
        max_length: int,
        aliased: list[tuple[str, str]],
        adapter: str,
        prefill_chunk: int | None = None,
        slots: int = 1,
    ) -> None:
        self.model_dir = model_dir
        self.tokenizer = tokenizer
        self.executor = executor
        self.signature = signature
        self.max_length = max_length
        self.aliased = aliased  # the resident caches; a windowed one left out shifts its rows (no rewind, no run ahead)
        self.shifting = any(p.windowed and (p.past, p.present) not in aliased for p in signature.kv)
        self.adapter = adapter
        self.prefill_chunk = prefill_chunk or max_length  # longer inputs run as several steps
        self.slots = slots  # sequences the cache holds at once (`generate_batch`, `onyxia serve --parallel`)
        self.position = 0  # tokens in the cache (slot 0's: the conversation `generate` continues)
        self.history: list[int] = []
        self.stats = GenerationStats()
        self._window: int | None = model_dir.config.get("sliding_window")
        self._symbols = executor.compiled.symbols  # a property that walks every tensor: read once
        self.step_dims = StepDims(signature, self._window, self._symbols, executor.input_names)
        self.vocab_size = vocab_size(executor, signature.logits)  # ids are checked against it before upload
        self.pipelined = True  # decode submits step N+1 before reading step N's token (llm/pipelined.py)
        self._token_carried = False
        self._sampling = bytes(12)  # SampleToken's params as last written: zeros (greedy) at load
        self.masked = False  # whether the resident allowed-token masks hold a zero bit (`constrained_rows`)
        # A list turns profiling on: each run's `RunProfile` (`Runtime(profiling=True)`) is appended to it
        self.profiles: list[RunProfile] | None = None
        self._turn = Turn()  # held by the generation in progress (see generate_ids)

    # ----- construction ------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        model_dir: str | Path,
        precision: str | None = None,
        max_length: int | None = None,
        *,
        slots: int = 1,
        prefill_chunk: int | None = None,
        runtime: Runtime | None = None,
        progress: Progress | None = None,
        accuracy_level: int | None = None,
        match_onnxruntime: bool = True,
        lm_head: str = "exact",
    ) -> Self:
        """`accuracy_level` overrides every MatMulNBits node's, like onnxruntime's session option
        (0: float activations; 4: int8 activations, what the 4-bit exports ask for).

        `match_onnxruntime` (float16 models only) computes in float32 where onnxruntime's CPU EP does,
        lacking a float16 kernel (residual Adds, Gelu, the lm head), so tokens equal onnxruntime's;
        False computes every op in the dtype the graph gives it (`MatchOnnxruntimeCpuFloat16`).

        `lm_head` "fp16" or "int8" makes the lm head read a reduced-precision copy of an f32 head weight
        (faster decode, approximate logits; `lm_head_precision`); "exact" (the default) changes nothing.

        `slots` is how many sequences the session holds at once (each `max_length` long): more than 1 compiles
        the plan for a batch of rows and lets `generate_batch` advance them together."""
        from onyxia.cli.llm.loading import LoadOptions, build_session

        options = LoadOptions(precision, max_length, slots, prefill_chunk, accuracy_level, match_onnxruntime, lm_head)
        return build_session(cls, model_dir, options, runtime, progress or (lambda _: None))

    # ----- generation --------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Run a two-token prefill and one decode step, then forget them.

        Drivers (lavapipe among them) compile a pipeline's machine code at its first dispatch; doing
        that here keeps it out of the first prompt's time to first token."""
        self.reset()
        self._forward([0, 0], [NEXT_TOKEN])
        self._forward([0], [NEXT_TOKEN])
        if self.slots > 1:  # and the batched paths: a padded two-row prefill, two-row decode steps
            self.generate_batch([[0, 0], [0, 0, 0]], 3, stop=[])
        self.reset()

    def reset(self) -> None:
        """Forget the conversation: the next prompt is prefilled from position 0."""
        with self._turn.hold("reset()"):
            self.position = 0
            self.history = []

    def rewind(self, position: int) -> int:
        """Keep the first `position` cached tokens, forget the rest; returns how many were kept.

        A growing cache is indexed by absolute position, so whatever lies past `position` is written
        over as the cache grows again. A fixed-capacity sliding buffer (onnxruntime-genai) may have
        shifted its entries, so there anything short of the whole history starts over from 0."""
        with self._turn.hold("rewind()"):
            if not isinstance(position, int) or not 0 <= position <= self.position:
                raise InputError(f"rewind(): position {position!r}; expected 0 to {self.position} (tokens cached)")
            if position < self.position and self.shifting:
                position = 0
            self.position = position
            del self.history[position:]
            return position

    def generate_ids(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        params: SamplingParams = GREEDY,
        stop: Sequence[int] = (),
        constraint: Constraint | None = None,
    ) -> Iterator[int]:
        """Token ids as they are produced; the prompt is appended to whatever the cache holds. With a
        `constraint` every id keeps the text on it (`llm/constrained_generate.py`).

        One generation at a time per session: the cache is one conversation's. Starting another
        (a second generator, another thread) while this one is open raises `SessionBusyError`;
        closing or finishing the generator frees the session."""
        with self._turn.hold("generate()"):
            yield from single_stream_ids(self, prompt_ids, max_new_tokens, params, stop, constraint)

    def generate(
        self,
        prompt: str | Sequence[int],
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        seed: int | None = None,
        stop: Sequence[int] | None = None,
        constraint: Constraint | None = None,
    ) -> Iterator[str]:
        """Text pieces as they are produced (stops at the model's EOS ids unless `stop` says otherwise); with a
        `constraint` (`Constraint.json_schema(...)`, `.regex(...)`, ...) the text matches it."""
        ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        params = SamplingParams(temperature, top_k, top_p, repetition_penalty, seed)
        stops = self.model_dir.eos_token_ids if stop is None else list(stop)
        yield from self.stream_text(ids, max_new_tokens, params, stops, [], constraint)

    def stream_text(
        self,
        ids: Sequence[int],
        max_new_tokens: int,
        params: SamplingParams,
        stops: Sequence[int],
        tokens: list[int],
        constraint: Constraint | None = None,
    ) -> Iterator[str]:
        """Decoded text as tokens arrive (stop tokens not shown); every sampled id is appended to `tokens`."""
        stream = self.tokenizer.stream()
        for token in self.generate_ids(ids, max_new_tokens, params, stops, constraint):
            tokens.append(token)
            if token in stops:
                break
            yield from filter(None, [stream.push(token)])
        yield from filter(None, [stream.flush()])

    def generate_batch(
        self,
        prompts: Sequence[str | Sequence[int]],
        max_new_tokens: int = 128,
        params: SamplingParams | Sequence[SamplingParams] = GREEDY,
        stop: Sequence[int] | None = None,
        constraint: Constraint | Sequence[Constraint | None] | None = None,
    ) -> list[list[int]]:
        """Each prompt's new token ids (a stop id included), generated together over the session's slots
        (`llm/batch.py`); prompts past the slot count wait for a free slot. For streaming, cancelling and
        arrivals over time, step a `batch()` and add `Stream`s to it."""
        from onyxia.cli.llm.generate_batch import generate_batch

        return generate_batch(self, prompts, max_new_tokens, params, stop, constraint)

    def batch(self) -> Batch:
        """A continuous batch over this session's slots; step it from one thread (`llm/batch.py`)."""
        from onyxia.cli.llm.batch import Batch

        return Batch(self)

    def next_token_logits(self, ids: Sequence[int]) -> np.ndarray:
        """Append `ids` to the cache and return the last position's logits (one row, float32)."""
        with self._turn.hold("next_token_logits()"):
            logits = self._forward(self._token_ids(ids), [self.signature.logits])[self.signature.logits]
        row: np.ndarray = logits.reshape(-1, logits.shape[-1])[-1].astype(np.float32)
        return row

    # ----- one forward pass --------------------------------------------------------------------
    def _token_ids(self, ids: Sequence[int]) -> list[int]:  # ids past the vocabulary would read garbage rows
        return checked_token_ids(ids, self.vocab_size)

    def _step(
        self, ids: list[int], params: SamplingParams, rng: np.random.Generator, generated: Sequence[int] = ()
    ) -> int:
        """Feed `ids` and draw the next token (`generated`: this request's tokens so far, for the penalties)."""
        if on_gpu(params):
            self.set_sampling(gpu_params(params, rng))
            return int(self._forward(ids, [NEXT_TOKEN])[NEXT_TOKEN].reshape(-1)[-1])
        logits = self._forward(ids, [self.signature.logits])[self.signature.logits]
        return sample_token(logits.reshape(-1, logits.shape[-1])[-1], params, self.history, rng, generated)

    def set_sampling(self, values: np.ndarray) -> None:
        """Queue SampleToken's params for the next run, a triple per batch row (12 bytes a row, skipped when
        unchanged); a plan compiled for one slot takes one triple."""
        values = values.reshape(-1, 3) if self.slots > 1 else values.reshape(3)
        if (data := values.tobytes()) != self._sampling:
            self.executor.write_input(SAMPLING, values)
            self._sampling = data

    def _forward(self, ids: list[int], outputs: list[str]) -> dict[str, np.ndarray]:
        return self._submit(self._token_ids(ids), outputs).read()

    def _submit(self, ids: list[int], outputs: list[str]) -> PendingRun:
        """Append `ids` to the cache, `prefill_chunk` tokens per run; the last run's `outputs` unread."""
        if self.position + len(ids) > self.max_length:
            raise InputError(f"{self.position} cached + {len(ids)} new tokens exceed max_length {self.max_length}")
        pending: PendingRun | None = None
        for start in range(0, len(ids), self.prefill_chunk):
            if pending is not None:
                pending.read()
            chunk = ids[start : start + self.prefill_chunk]
            wanted = outputs if start + len(chunk) == len(ids) else []
            feeds, dims = step_feeds(self.signature, [Row(0, self.position)], [chunk], len(chunk), self.step_dims)
            self.executor.update_dimensions(dims)
            pending = self._run(feeds, wanted)
            self.position += len(chunk)
            self.history.extend(chunk)
        assert pending is not None, "the prompt has tokens (checked by the callers)"
        return pending

    def _run(self, feeds: dict[str, np.ndarray], wanted: list[str]) -> PendingRun:
        if self.profiles is None:
            return self.executor.submit(feeds, outputs=wanted)
        from onyxia.runtime.pending import PendingRun

        profile = self.executor.profile_run(feeds, wanted)
        self.profiles.append(profile)
        return PendingRun(None, 0, dict(profile.outputs))
