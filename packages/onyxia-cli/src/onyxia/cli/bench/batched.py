"""Onyxia's batched decode for `onyxia bench --batch N`: N streams decoding together, aggregate tok/s.

A session with `slots=N` advances every decoding stream in one plan run (`llm/batch.py`), reading each
weight once per step for all rows; this measures what that buys. Worker side (imported by the worker only
for the `onyxia` engine, onyxia loaded lazily): the N=1 figure comes from the single-stream worker's own
session (slots 1) after its usual measurement, every N > 1 from a worker process of its own whose session
is loaded with `slots=N` (same max_length, so the cache capacity is the same at every N).

The N streams are made to reach decoding at one shared length: a batch step prefills one stream's prompt
(one chunk: the session's prefill chunk is raised to the longest prompt) and then decodes every stream
that has a token to feed, the newcomer included. Stream i, prefilled at step i + 1, gets a prompt one
token longer than stream i - 1, which has decoded once more by then, so all N lengths are equal from
then on: graphs that can only advance rows of equal length (`Batch.per_row_positions` False) still decode
all N together. Then `decode_tokens` steps are timed; tokens are counted over all streams. Stream 0's
prompt is the single-stream run's, so its greedy ids are comparable with that run's.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onyxia.cli.llm import LlmSession
    from onyxia.cli.llm.batch import Batch

__all__ = ["measure_streams", "run_batched", "stream_prompts"]

_FIRST_ORDINARY_ID = 7  # = suite's: after Gemma's special tokens 0-6
_SHIFT = 104_729  # a prime: stream i's ids are the base prompt's moved by i * _SHIFT within the ordinary ids


def stream_prompts(grown: list[list[int]], vocab_size: int) -> list[list[int]]:
    """Stream i's prompt from `grown[i]` (the bench prompt `len(grown[0]) + i` tokens long): its ordinary ids
    are moved by i * a prime within the ordinary ids, so no two streams share a prefix past the leading <bos>
    (stream 0's is unchanged: the single-stream run's prompt)."""
    span = vocab_size - _FIRST_ORDINARY_ID
    return [
        ids[:1] + [_FIRST_ORDINARY_ID + (t - _FIRST_ORDINARY_ID + i * _SHIFT) % span for t in ids[1:]]
        for i, ids in enumerate(grown)
    ]


def measure_streams(
    session: LlmSession, prompts: list[list[int]], decode_tokens: int, profile_steps: int = 0
) -> dict[str, Any]:
    """Prefill `prompts` into as many streams (see the module docstring), then time `decode_tokens` steps.

    Figures: streams, rows_per_step (the fewest streams one timed step advanced: N when all decode
    together), decode_steps, decode_tokens (over all streams), decode_s, aggregate_decode_tok_s,
    per_stream_decode_tok_s, stream0_tokens (its first token and the next `decode_tokens`); with
    `profile_steps` (a session on a profiling runtime) also profile: `profile_steps` more batched steps run
    one by one through `profile_run`, summarized as the single-stream profile is (host split included)."""
    from onyxia.cli.llm.batch import Batch, Stream

    count = len(prompts)
    if count > session.slots:
        raise ValueError(f"measure_streams(): {count} streams for a session of {session.slots} slots")
    session.reset()
    batch = Batch(session)
    # stream 0 has count + 1 tokens once all are prefilled (its first step prefills and decodes), then one
    # untimed step, the timed ones, and one to spare: no stream finishes inside the timed steps
    new_tokens = count + decode_tokens + profile_steps + 4
    streams = [batch.add(Stream(prompt, new_tokens)) for prompt in prompts]  # no stop ids: none ends early
    for _ in range(count * (1 + max(len(p) for p in prompts) // session.prefill_chunk)):
        if all(s.tokens for s in streams):
            break
        batch.step()
    if not all(s.tokens for s in streams):
        raise RuntimeError(f"measure_streams(): {count} streams still prefilling after {batch.steps} decode steps")
    batch.step()  # one untimed step with every row (drivers compile a pipeline at its first dispatch)
    before, rows = sum(len(s.tokens) for s in streams), count
    started = time.perf_counter()
    for _ in range(decode_tokens):
        batch.step()
        rows = min(rows, batch.last_batch_size)
    decode_s = time.perf_counter() - started
    produced = sum(len(s.tokens) for s in streams) - before
    profile = _profile_steps(session, batch, profile_steps) if profile_steps else None
    for stream in streams:
        stream.cancel()
    batch.run()  # frees the slots
    return {
        "streams": count,
        "rows_per_step": rows,
        "decode_steps": decode_tokens,
        "decode_tokens": produced,
        "decode_s": decode_s,
        "aggregate_decode_tok_s": produced / decode_s,
        "per_stream_decode_tok_s": produced / decode_s / count,
        "stream0_tokens": streams[0].tokens[: decode_tokens + 1],
        **({"profile": profile} if profile else {}),
    }


def _profile_steps(session: LlmSession, batch: Batch, steps: int) -> dict[str, Any]:
    """`steps` batched decode steps profiled (unpipelined: a profiled run is timed alone): GPU time per op and
    the host split before submit (dims, inputs, encode), per step, as `summarize_profiles` gives it."""
    from onyxia.cli.bench.onyxia_runner import summarize_profiles
    from onyxia.runtime.profiling import RunProfile

    profiles: list[RunProfile] = []
    executor = session.executor
    session.profiles, dims_ns = profiles, executor.stats.dimension_update_ns
    try:
        batch.step()  # reads the run submitted ahead in the timed steps (and, profiling, submits none ahead)
        for _ in range(steps):
            batch.step()
    finally:
        session.profiles = None
    summary = summarize_profiles(profiles)
    summary["host_dims_ms_per_step"] = (executor.stats.dimension_update_ns - dims_ns) / 1e6 / max(len(profiles), 1)
    return summary


def run_batched(spec: dict[str, Any]) -> dict[str, Any]:
    """The worker's `streams` > 1 run: load the session with `slots=streams`, measure its streams."""
    from onyxia.cli.bench.onyxia_runner import OnyxiaRunner
    from onyxia.cli.bench.worker import peak_rss_bytes
    from onyxia.cli.llm.loading import PREFILL_CHUNK

    prompts: list[list[int]] = spec["stream_prompts"]
    runner = OnyxiaRunner(
        spec["model_dir"],
        spec["precision"],
        lm_head=spec.get("lm_head", "exact"),
        profile=spec.get("profile", False),
        slots=spec["streams"],
        prefill_chunk=max(PREFILL_CHUNK, *(len(p) for p in prompts)),
    )
    loaded = runner.load()
    profile_steps = spec.get("profile_steps", 4) if spec.get("profile") else 0
    figures = measure_streams(runner.loaded, prompts, spec["decode_tokens"], profile_steps)
    executor = runner.loaded.executor
    return {
        **figures,
        "ready_s": loaded["ready_s"],
        "plan_cached": loaded["plan_cached"],  # slot counts above 1 share one batched plan
        "gpu_bytes": executor.gpu_bytes,
        "kv_capacity_bytes": sum(executor.buffer_bytes(p.past) for p in runner.loaded.signature.kv),
        "peak_rss_bytes": peak_rss_bytes(),
    }
