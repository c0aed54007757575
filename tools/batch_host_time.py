"""Host CPU time per decode step: one stream's pipelined decode against a batch of N streams.

The host's share of a step (building feeds, patching dims, encoding, bookkeeping) must not grow with the
batch, so per token it falls as rows are added (issue 26). Measured as the stepping thread's wall time
outside `PendingRun.read` (where it waits for the GPU, which on lavapipe computes on its own threads):
what the host spends that the GPU's work does not cover. Both figures come from the same session in one
run, alternated three times.

    python tools/batch_host_time.py [MODEL_DIR] [--precision P] [--slots 8] [--steps 48]

Without MODEL_DIR it uses the built-in demo (fortune-gemma3).
"""

from __future__ import annotations

import argparse
import importlib.resources
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_WAITED = [0.0]  # seconds inside PendingRun.read since the last reset


def _count_waits() -> None:
    from onyxia.runtime.pending import PendingRun

    read: Callable[..., Any] = PendingRun.read

    def timed(self: Any) -> Any:
        start = time.perf_counter()
        try:
            return read(self)
        finally:
            _WAITED[0] += time.perf_counter() - start

    PendingRun.read = timed  # type: ignore[method-assign]


def _host_ms(start: float) -> float:
    return (time.perf_counter() - start - _WAITED[0]) * 1e3


def _session(model: str | None, precision: str | None, slots: int):  # type: ignore[no-untyped-def]
    from onyxia.cli.commands.llm_options import DEMO_MODEL_DIR
    from onyxia.cli.llm import LlmSession

    if model is not None:
        return LlmSession.from_pretrained(Path(model), precision, max_length=512, slots=slots)
    demo = importlib.resources.files("onyxia.cli.data") / DEMO_MODEL_DIR
    with importlib.resources.as_file(demo) as root:
        return LlmSession.from_pretrained(root, precision, max_length=512, slots=slots)


def _single(llm, steps: int) -> float:  # type: ignore[no-untyped-def]
    """Thread CPU ms per decode step of one pipelined stream (the prefill's excluded)."""
    llm.reset()
    tokens = llm.generate_ids([2, 10, 11, 12], steps + 1)
    next(tokens)  # the prefill's token
    start, _WAITED[0] = time.perf_counter(), 0.0
    for _ in tokens:
        pass
    return _host_ms(start) / steps


def _batched(llm, rows: int, steps: int) -> float:  # type: ignore[no-untyped-def]
    """Thread CPU ms per decode step of `rows` streams stepped together (admission and prefill excluded)."""
    from onyxia.cli.llm.batch import Stream

    llm.reset()
    batch = llm.batch()
    streams = [batch.add(Stream([2, 10 + r, 11, 12], steps + 2)) for r in range(rows)]
    while any(not s.tokens for s in streams):
        batch.step()
    start, before, _WAITED[0] = time.perf_counter(), batch.steps, 0.0
    while batch.step() and batch.steps - before < steps:
        pass
    return _host_ms(start) / (batch.steps - before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=None)
    parser.add_argument("--precision", default=None)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--steps", type=int, default=48)
    args = parser.parse_args()
    llm = _session(args.model, args.precision, args.slots)
    _count_waits()
    rounds = [(_single(llm, args.steps), _batched(llm, args.slots, args.steps)) for _ in range(3)]  # A/B, 3 times
    print("| stepping | host ms per step (3 rounds) | per token |\n|---|---|---:|")
    single = [a for a, _ in rounds]
    batched = [b for _, b in rounds]
    print(f"| 1 stream, pipelined | {', '.join(f'{v:.2f}' for v in single)} | {min(single):.2f} |")
    print(f"| batch of {args.slots} | {', '.join(f'{v:.2f}' for v in batched)} | {min(batched) / args.slots:.2f} |")


if __name__ == "__main__":
    main()
