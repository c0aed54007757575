"""Host CPU time per decode step: one stream's pipelined decode against a batch of N streams.

The host's share of a step (building feeds, patching dims, encoding, bookkeeping) must not grow with the
batch, so per token it falls as rows are added (issue 26). Measured as the stepping thread's wall time
outside `PendingRun.read` (where it waits for the GPU, which on lavapipe computes on its own threads):
what the host spends that the GPU's work does not cover. On lavapipe the GPU's threads share the CPU cores
with the stepping thread, so its wall time also counts the time it waited for a core; the thread's CPU time
outside the waits (`time.thread_time`) leaves that out and is printed beside it. Both figures come from the
same session in one run, alternated `--rounds` times (medians printed).

    python tools/batch_host_time.py [MODEL_DIR] [--precision P] [--slots 8] [--steps 48] [--rounds 5]

Without MODEL_DIR it uses the built-in demo (fortune-gemma3).
"""

from __future__ import annotations

import argparse
import importlib.resources
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_WAITED = [0.0, 0.0]  # wall and thread CPU seconds inside PendingRun.read since the last reset


def _count_waits() -> None:
    from onyxia.runtime.pending import PendingRun

    read: Callable[..., Any] = PendingRun.read

    def timed(self: Any) -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return read(self)
        finally:
            _WAITED[0] += time.perf_counter() - start
            _WAITED[1] += time.thread_time() - cpu

    PendingRun.read = timed  # type: ignore[method-assign]


def _start() -> tuple[float, float]:
    _WAITED[:] = [0.0, 0.0]
    return time.perf_counter(), time.thread_time()


def _host_ms(start: tuple[float, float], steps: int) -> tuple[float, float]:
    """(wall, thread CPU) ms per step outside the waits since `start`."""
    wall = time.perf_counter() - start[0] - _WAITED[0]
    cpu = time.thread_time() - start[1] - _WAITED[1]
    return wall * 1e3 / steps, cpu * 1e3 / steps


def _session(model: str | None, precision: str | None, slots: int):  # type: ignore[no-untyped-def]
    from onyxia.cli.commands.llm_options import DEMO_MODEL_DIR
    from onyxia.cli.llm import LlmSession

    if model is not None:
        return LlmSession.from_pretrained(Path(model), precision, max_length=512, slots=slots)
    demo = importlib.resources.files("onyxia.cli.data") / DEMO_MODEL_DIR
    with importlib.resources.as_file(demo) as root:
        return LlmSession.from_pretrained(root, precision, max_length=512, slots=slots)


def _single(llm, steps: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Host ms per decode step of one pipelined stream (the prefill's excluded)."""
    llm.reset()
    tokens = llm.generate_ids([2, 10, 11, 12], steps + 1)
    next(tokens)  # the prefill's token
    start = _start()
    for _ in tokens:
        pass
    return _host_ms(start, steps)


def _batched(llm, rows: int, steps: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Host ms per decode step of `rows` streams stepped together (admission and prefill excluded)."""
    from onyxia.cli.llm.batch import Stream

    llm.reset()
    batch = llm.batch()
    streams = [batch.add(Stream([2, 10 + r, 11, 12], steps + 2)) for r in range(rows)]
    while any(not s.tokens for s in streams):
        batch.step()
    start, before = _start(), batch.steps
    while batch.step() and batch.steps - before < steps:
        pass
    return _host_ms(start, batch.steps - before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=None)
    parser.add_argument("--precision", default=None)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    llm = _session(args.model, args.precision, args.slots)
    _count_waits()
    rounds = [(_single(llm, args.steps), _batched(llm, args.slots, args.steps)) for _ in range(args.rounds)]  # A/B
    print("| stepping | host ms per step, wall (rounds) | median | CPU ms per step | median | CPU per token |")
    print("|---|---|---:|---|---:|---:|")
    for b, (label, rows) in enumerate((("1 stream, pipelined", 1), (f"batch of {args.slots}", args.slots))):
        wall, cpu = [r[b][0] for r in rounds], [r[b][1] for r in rounds]
        print(
            f"| {label} | {', '.join(f'{v:.2f}' for v in wall)} | {statistics.median(wall):.2f} "
            f"| {', '.join(f'{v:.2f}' for v in cpu)} | {statistics.median(cpu):.2f} "
            f"| {statistics.median(cpu) / rows:.2f} |"
        )


if __name__ == "__main__":
    main()
