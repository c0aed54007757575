"""One worker thread owns the session; requests wait in a bounded FIFO queue and run one at a time.

The session is one conversation's KV cache on one adapter, so generations cannot overlap: the queue
serves them in arrival order (fair: nobody is overtaken), and admission refuses a request once
`max_queue` are waiting, with an estimate of the wait (`QueueFull.retry_after`) for the Retry-After
header. A cancelled job stops after the decode step in progress; one cancelled while queued never
starts. `paused()` holds the worker between jobs (admission goes on): inside it the session is the
caller's, for maintenance and for tests that compare against the session directly.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from onyxia.cli.llm.session import LlmSession
from onyxia.cli.serve.generation import run_job
from onyxia.cli.serve.jobs import Failed, Job
from onyxia.cli.serve.metrics import Metrics
from onyxia.core import OnyxiaError

__all__ = ["Engine", "EngineClosed", "QueueFull"]

log = logging.getLogger(__name__)


class QueueFull(OnyxiaError):
    def __init__(self, waiting: int, retry_after: int) -> None:
        super().__init__(f"the server is busy: {waiting} requests are waiting; retry in {retry_after} s")
        self.retry_after = retry_after


class EngineClosed(OnyxiaError):
    """The server is shutting down: queued jobs are answered with this, new ones refused."""


class Engine:
    def __init__(self, session: LlmSession, max_queue: int, metrics: Metrics | None = None) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue is {max_queue}; expected at least 1")
        self.session, self.max_queue = session, max_queue
        self.metrics = metrics or Metrics()
        self._pending: deque[Job] = deque()
        self._cond = threading.Condition()
        self._paused = self._busy = self._closed = False
        self._current: Job | None = None
        self._seconds_per_job = 1.0  # moving average: the Retry-After estimate
        self._thread = threading.Thread(target=self._serve, name="onyxia-serve-worker", daemon=True)
        self._thread.start()

    @property
    def queue_depth(self) -> int:
        return len(self._pending)

    def submit(self, job: Job) -> None:
        """Admit `job` to the queue, or raise `QueueFull` / `EngineClosed`."""
        with self._cond:
            if self._closed:
                raise EngineClosed("the server is shutting down")
            waiting = len(self._pending)
            if waiting >= self.max_queue:
                raise QueueFull(waiting, max(1, math.ceil((waiting + 1) * self._seconds_per_job)))
            self._pending.append(job)
            self.metrics.queue_depth.set(len(self._pending))
            self._cond.notify_all()

    @contextmanager
    def paused(self, timeout: float | None = None) -> Iterator[LlmSession]:
        """Hold the worker once the job in progress (if any) ends; the session is yours inside."""
        with self._cond:
            self._paused = True
            if not self._cond.wait_for(lambda: not self._busy, timeout):
                self._paused = False
                raise TimeoutError(f"the job in progress did not finish within {timeout} s")
        try:
            yield self.session
        finally:
            with self._cond:
                self._paused = False
                self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Whether the queue emptied and the worker went idle within `timeout` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._busy and not self._pending, timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Let the job in progress finish (cancelled), refuse the queued ones, stop the worker."""
        with self._cond:
            self._closed = True
            dropped = list(self._pending)
            self._pending.clear()
            self.metrics.queue_depth.set(0)
            if self._current is not None:
                self._current.cancel()
            self._cond.notify_all()
        for job in dropped:
            job.emit(Failed(EngineClosed("the server shut down before this request ran")))
        self._thread.join(timeout)

    def _serve(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or (bool(self._pending) and not self._paused))
                if self._closed:
                    return
                job = self._pending.popleft()
                self.metrics.queue_depth.set(len(self._pending))
                self._busy, self._current = True, job
            try:
                self._run(job)
            finally:
                with self._cond:
                    self._busy, self._current = False, None
                    self._cond.notify_all()

    def _run(self, job: Job) -> None:
        if job.cancelled.is_set():  # its client left while it waited
            return
        start = time.perf_counter()
        try:
            finished = run_job(self.session, job)
        except Exception as e:  # reported to this job's client; the session stays usable for the next
            if not isinstance(e, OnyxiaError):
                log.exception("generation failed")
            job.emit(Failed(e))
            return
        self._seconds_per_job = 0.8 * self._seconds_per_job + 0.2 * (time.perf_counter() - start)
        self.metrics.observe(finished)
        job.emit(finished)
