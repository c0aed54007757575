"""Submitting a run without waiting for it: `PlanExecutor.submit()` returns a `PendingRun`.

A run's outputs are copied into a staging buffer at the end of its command buffer; reading them maps
that buffer, which waits for the GPU. With two staging buffers (slots) the host can encode and
submit the next run while the GPU still works on this one, and read this one's outputs after: an
LLM's decode step N+1 takes its token from step N on the GPU (`PlanExecutor.carry`) and is
submitted before step N's token is read. A run submitted while nothing is unread uses slot 0 (a
plain `run()` never needs a second buffer); a third submit reads the oldest unread run first, so at
most two are in flight. A plan that reads values back mid-run (segments) runs to the end at submit.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import wgpu

from onyxia.core.errors import DeviceError
from onyxia.runtime.commands import PassCalls, Program, encode
from onyxia.runtime.device import DeviceContext, ExecutorStats, wgpu_boundary
from onyxia.runtime.readback import OutputReadback
from onyxia.runtime.segments import SegmentedExecutor, run_in_segments

__all__ = ["PendingRun", "submit_run"]


class PendingRun:
    """Outputs of a submitted run; `read()` maps its staging buffer once (later calls return the same)."""

    def __init__(self, owner: _Submitter | None, slot: int, outputs: dict[str, np.ndarray] | None = None) -> None:
        self._owner, self._slot, self._outputs = owner, slot, outputs

    @property
    def done(self) -> bool:
        return self._outputs is not None

    def read(self) -> dict[str, np.ndarray]:
        if self._outputs is None:
            assert self._owner is not None
            self._outputs = self._owner._read_slot(self._slot, self)
        return self._outputs


class _Submitter(SegmentedExecutor, Protocol):
    ctx: DeviceContext
    stats: ExecutorStats
    _program: Program
    _calls: PassCalls
    _readback: OutputReadback
    _host_steps: bool
    _unread: list[PendingRun | None]
    _last_slot: int

    def _read_slot(self, slot: int, run: PendingRun) -> dict[str, np.ndarray]: ...

    def _encode_tail(self, encoder: wgpu.GPUCommandEncoder, wanted: set[str], slot: int = 0) -> None: ...


def submit_run(executor: _Submitter, wanted: set[str]) -> PendingRun:
    """Encode and submit one run whose inputs `_prepare` queued; its outputs wait in a staging slot."""
    if executor._host_steps:  # read-backs mid-run (NonZero, If): the run completes here
        for pending in executor._unread:
            if pending is not None:
                pending.read()
        return PendingRun(None, 0, run_in_segments(executor, wanted))
    free = [slot for slot in (0, 1) if executor._unread[slot] is None]
    slot = free[0] if free else 1 - executor._last_slot  # both in flight: the older one is read first
    older = executor._unread[slot]
    if older is not None:
        older.read()
    with wgpu_boundary(DeviceError, "run(): encoding or submitting the plan"):
        encoder = executor.ctx.device.create_command_encoder()
        encode(encoder, executor._program, executor._calls)
        executor._encode_tail(encoder, wanted, slot)
        executor.ctx.queue.submit([encoder.finish()])
    executor.stats.runs += 1
    executor.stats.dispatches_encoded = executor._program.dispatches
    run = PendingRun(executor, slot)
    executor._unread[slot], executor._last_slot = run, slot
    return run
