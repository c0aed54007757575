"""The Onyxia engine for the bench worker: an `LlmSession` with greedy decoding, timed by load phase.

Load figures come from the session's progress phases: `load_compile_s` is parsing plus compiling (what
the issue compares with a peer's session creation), weight upload and the driver warm-up are separate.
With profiling, the runtime is opened with timestamp queries and `extras()` replays a few decode steps
with the session's `profiles` list set, so those steps run through `PlanExecutor.profile_run`. Given
`stream_prompts` (one, `--batch`'s N=1), `extras()` then also measures batched decode over this session's
slot (`batched.measure_streams`); `slots` > 1 loads the session that `batched.run_batched` measures.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the runner imports them in load(): the worker module stays importable without wgpu
    from onyxia.cli.llm import LlmSession
    from onyxia.runtime.profiling import RunProfile

__all__ = ["OnyxiaRunner", "summarize_profiles"]

PROFILE_TOP = 20
_PLAN_CACHED = "loaded the compiled plan from the cache"  # llm/loading.py's progress phase on a plan cache hit


class OnyxiaRunner:
    """The worker's `Runner` protocol over an `LlmSession` (`onyxia.cli.bench.worker`)."""

    def __init__(
        self,
        model_dir: str | Path,
        precision: str,
        profile: bool = False,
        profile_steps: int = 4,
        lm_head: str = "exact",
        *,
        slots: int = 1,
        prefill_chunk: int | None = None,
        stream_prompts: list[list[int]] | None = None,
        decode_tokens: int = 0,
    ) -> None:
        self.model_dir, self.precision, self.lm_head = Path(model_dir), precision, lm_head
        self.profile, self.profile_steps = profile, profile_steps
        self.slots, self.prefill_chunk = slots, prefill_chunk
        self.stream_prompts, self.decode_tokens = stream_prompts, decode_tokens
        self.session: LlmSession | None = None
        self._last = 0

    @property
    def loaded(self) -> LlmSession:
        """The session `load()` built; asking before it is a protocol error, named here."""
        if self.session is None:
            raise RuntimeError(f"OnyxiaRunner({self.model_dir}): load() has not run; the worker calls it first")
        return self.session

    def load(self) -> dict[str, Any]:
        from onyxia.cli.llm import LlmSession
        from onyxia.runtime import Runtime

        marks: dict[str, float] = {}

        def mark(phase: str) -> None:
            marks.setdefault(phase, time.perf_counter())

        started = time.perf_counter()
        runtime = Runtime(profiling=self.profile)
        # only onnx-community directories hold a file per precision (genai and torch.onnx exports: one)
        precision = self.precision if (self.model_dir / "onnx").is_dir() else None
        session = self.session = LlmSession.from_pretrained(
            self.model_dir,
            precision,
            slots=self.slots,
            prefill_chunk=self.prefill_chunk,
            runtime=runtime,
            progress=mark,
            lm_head=self.lm_head,
        )
        ready = time.perf_counter()
        uploading, warming = marks["uploading weights"], marks["warming up"]
        # a plan cache hit (another slot count shares the batched plan) skips parsing and compiling
        cached = _PLAN_CACHED in marks
        parsing = marks[_PLAN_CACHED] if cached else marks["parsing"]
        return {
            "setup_s": parsing - started,  # device, model directory and tokenizer
            "load_compile_s": uploading - parsing,  # the plan read from the cache, where it was
            "plan_cached": cached,
            "upload_s": warming - uploading,
            "warmup_s": ready - warming,
            "ready_s": ready - started,
            "adapter": session.adapter,
            "dispatches": session.executor.compiled.dispatch_count,
        }

    def first_token(self, ids: list[int]) -> int:
        session = self.loaded
        session.reset()
        self._last = next(iter(session.generate_ids(ids, 1)))
        return self._last

    def decode(self, token: int, n: int) -> list[int]:
        tokens = list(self.loaded.generate_ids([token], n))
        self._last = tokens[-1]
        return tokens

    def extras(self) -> dict[str, Any]:
        session = self.loaded
        executor = session.executor
        figures: dict[str, Any] = {
            "gpu_bytes": executor.gpu_bytes,
            "weight_bytes": executor.weight_bytes,
            "kv_capacity_bytes": sum(executor.buffer_bytes(p.past) for p in session.signature.kv),
        }
        if self.profile:
            profiles: list[RunProfile] = []
            session.profiles = profiles
            dims_ns = executor.stats.dimension_update_ns
            try:
                self.decode(self._last, self.profile_steps)
            finally:
                session.profiles = None
            figures["profile"] = summarize_profiles(profiles)
            steps = max(len(profiles), 1)  # update_dimensions() runs before each step's profiled run
            figures["profile"]["host_dims_ms_per_step"] = (executor.stats.dimension_update_ns - dims_ns) / 1e6 / steps
        if self.stream_prompts:  # last: it leaves the session's history to the batch
            from onyxia.cli.bench.batched import measure_streams

            profile_steps = self.profile_steps if self.profile else 0
            figures["batched"] = measure_streams(session, self.stream_prompts, self.decode_tokens, profile_steps)
        return figures


def summarize_profiles(profiles: list[RunProfile], top: int = PROFILE_TOP) -> dict[str, Any]:
    """Per-step means over `profiles`: GPU ms by op type and by node, host ms before submit."""
    steps = len(profiles)
    by_type: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_node: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for profile in profiles:
        for d in profile.dispatches:
            for row in (by_type[d.op_type], by_node[(d.node, d.op_type)]):
                row[0] += d.gpu_ns / 1e6 / steps
                row[1] += 1 / steps
    gpu_ms = sum(ms for ms, _ in by_type.values())
    types = sorted(by_type.items(), key=lambda kv: -kv[1][0])
    nodes = sorted(by_node.items(), key=lambda kv: -kv[1][0])
    return {
        "steps": steps,
        "dispatches_per_step": len(profiles[-1].dispatches) if profiles else 0,
        "gpu_ms_per_step": gpu_ms,
        "host_prepare_ms_per_step": sum(p.host_prepare_ns for p in profiles) / 1e6 / max(steps, 1),
        "host_encode_ms_per_step": sum(p.host_encode_ns for p in profiles) / 1e6 / max(steps, 1),
        "by_op_type": [
            {"op_type": t, "gpu_ms": ms, "share": ms / gpu_ms if gpu_ms else 0.0, "dispatches": round(n)}
            for t, (ms, n) in types[:top]
        ],
        "by_node": [
            {"node": node, "op_type": t, "gpu_ms": ms, "share": ms / gpu_ms if gpu_ms else 0.0}
            for (node, t), (ms, _) in nodes[:top]
        ],
    }
