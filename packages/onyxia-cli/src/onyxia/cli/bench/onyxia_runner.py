"""The Onyxia engine for the bench worker: an `LlmSession` with greedy decoding, timed by load phase.

Load figures come from the session's progress phases: `load_compile_s` is parsing plus compiling (what
the issue compares with a peer's session creation), weight upload and the driver warm-up are separate.
With profiling, the runtime is opened with timestamp queries and `extras()` replays a few decode steps
through `PlanExecutor.profile_run`, by handing the session a wrapper of its executor for those steps.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["OnyxiaRunner", "ProfilingExecutor", "summarize_profiles"]

PROFILE_TOP = 20


class OnyxiaRunner:
    def __init__(self, model_dir: str | Path, precision: str, profile: bool = False, profile_steps: int = 4) -> None:
        self.model_dir, self.precision = Path(model_dir), precision
        self.profile, self.profile_steps = profile, profile_steps
        self.session: Any = None
        self._last = 0

    def load(self) -> dict[str, Any]:
        from onyxia.cli.llm import LlmSession
        from onyxia.runtime import Runtime

        marks: dict[str, float] = {}

        def mark(phase: str) -> None:
            marks.setdefault(phase, time.perf_counter())

        started = time.perf_counter()
        runtime = Runtime(profiling=self.profile)
        self.session = LlmSession.from_pretrained(self.model_dir, self.precision, runtime=runtime, progress=mark)
        ready = time.perf_counter()
        parsing, uploading, warming = marks["parsing"], marks["uploading weights"], marks["warming up"]
        return {
            "setup_s": parsing - started,  # device, model directory and tokenizer
            "load_compile_s": uploading - parsing,
            "upload_s": warming - uploading,
            "warmup_s": ready - warming,
            "ready_s": ready - started,
            "adapter": self.session.adapter,
            "dispatches": self.session.executor.compiled.dispatch_count,
        }

    def first_token(self, ids: list[int]) -> int:
        self.session.reset()
        self._last = next(iter(self.session.generate_ids(ids, 1)))
        return self._last

    def decode(self, token: int, n: int) -> list[int]:
        tokens = list(self.session.generate_ids([token], n))
        self._last = tokens[-1]
        return tokens

    def extras(self) -> dict[str, Any]:
        executor = self.session.executor
        figures: dict[str, Any] = {
            "gpu_bytes": executor.gpu_bytes,
            "weight_bytes": executor.weight_bytes,
            "kv_capacity_bytes": sum(executor.buffer_bytes(p.past) for p in self.session.signature.kv),
        }
        if self.profile:
            wrapper = ProfilingExecutor(executor)
            self.session.executor = wrapper
            try:
                self.decode(self._last, self.profile_steps)
            finally:
                self.session.executor = executor
            figures["profile"] = summarize_profiles(wrapper.profiles)
        return figures


class ProfilingExecutor:
    """Stands in for a `PlanExecutor`: `run()` goes through `profile_run()` and keeps each profile."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.profiles: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.executor, name)

    def run(self, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None = None) -> dict[str, np.ndarray]:
        profile = self.executor.profile_run(inputs, outputs)
        self.profiles.append(profile)
        return dict(profile.outputs)


def summarize_profiles(profiles: list[Any], top: int = PROFILE_TOP) -> dict[str, Any]:
    """Per-step means over `profiles` (RunProfile): GPU ms by op type and by node, host ms before submit."""
    steps = len(profiles)
    by_type: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_node: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for profile in profiles:
        for d in profile.dispatches:
            for key, table in ((d.op_type, by_type), ((d.node, d.op_type), by_node)):
                table[key][0] += d.gpu_ns / 1e6 / steps  # type: ignore[index]
                table[key][1] += 1 / steps  # type: ignore[index]
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
