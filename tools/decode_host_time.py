"""Host CPU time per step of the real (pipelined) decode loop, split by part: issue 12's host budget.

Loads the bench's synthetic model (`onyxia bench` caches it under ~/.cache/onyxia/bench/), prefills a
short prompt and decodes `--tokens` greedily through `LlmSession.generate_ids`, the pipelined path,
timing each part of every step with the thread's CPU time (`time.thread_time_ns`: a wait for the GPU
costs none). Each step runs after a GPU wait, so its caches are cold, as in real use; the medians
over the steps (the first two left out) are printed as JSON, in milliseconds:

    step      one decode step's host work (`pipelined._submit_carried`), all of the below
    dims      `PlanExecutor.update_dimensions` (of which `layout`: `IncrementalLayout.update`,
              `commit`: `dims_commit._commit_delta`, `readback`: `OutputReadback.plan` in it)
    inputs    `PlanExecutor._prepare`: checking the step's feeds and queueing their writes
    encode    `commands.encode` (wgpu calls per dispatch), `finish` and `submit` the rest of the run

Usage: .venv/bin/python tools/decode_host_time.py [--tokens 40] [--precision q4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODEL = Path.home() / ".cache/onyxia/bench/gemma3-270m-synthetic"
PARTS = ["step", "dims", "layout", "commit", "readback", "inputs", "encode", "finish", "submit"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--precision", default="q4")
    parser.add_argument("--model", type=Path, default=MODEL)
    args = parser.parse_args()

    import onyxia.runtime.dims_commit as dims_commit
    import onyxia.runtime.incremental as incremental
    import onyxia.runtime.pending as pending
    import onyxia.runtime.readback as readback
    from onyxia.cli.llm import LlmSession
    from onyxia.cli.llm import pipelined as pipelined
    from onyxia.runtime.executor import PlanExecutor

    session = LlmSession.from_pretrained(args.model, args.precision)
    current: dict[str, int] = {}

    def timed(owner: Any, name: str, part: str) -> None:
        real: Callable[..., Any] = getattr(owner, name)

        def wrapper(*a: Any, **k: Any) -> Any:
            started = time.thread_time_ns()
            try:
                return real(*a, **k)
            finally:
                current[part] = current.get(part, 0) + time.thread_time_ns() - started

        setattr(owner, name, wrapper)

    device = session.executor.ctx.device
    timed(PlanExecutor, "update_dimensions", "dims")
    timed(incremental.IncrementalLayout, "update", "layout")
    timed(dims_commit, "_commit_delta", "commit")
    timed(readback.OutputReadback, "plan", "readback")
    timed(PlanExecutor, "_prepare", "inputs")
    timed(pending, "encode", "encode")
    timed(type(device.create_command_encoder()), "finish", "finish")
    timed(type(device.queue), "submit", "submit")
    timed(pipelined, "_submit_carried", "step")
    steps: list[dict[str, int]] = []
    step = pipelined._submit_carried

    def one_step(*a: Any) -> Any:
        current.clear()
        try:
            return step(*a)
        finally:
            steps.append(dict(current))

    pipelined._submit_carried = one_step  # type: ignore[assignment]
    tokens = list(session.generate_ids(list(range(5, 21)), args.tokens))
    measured = steps[2:]
    medians = {part: statistics.median(s.get(part, 0) for s in measured) / 1e6 for part in PARTS}
    print(json.dumps({"steps": len(measured), "tokens": tokens[:8], **{k: round(v, 3) for k, v in medians.items()}}))


if __name__ == "__main__":
    main()
