"""One worker thread steps the session's batch; requests wait in a bounded FIFO queue for a free slot.

The session holds `slots` sequences (`onyxia serve --parallel N`); every step advances all of them in one
plan run and prefills at most one chunk of a newcomer (`llm/batch.py`), so a running stream never waits for
a whole prompt, let alone a whole answer. Jobs beyond the slots wait in arrival order (nobody is overtaken),
and admission refuses a request once `max_queue` are waiting, with an estimate of the wait
(`QueueFull.retry_after`) for the Retry-After header. A cancelled job (a client that left) frees its slot at
the next step; one cancelled while queued never starts. `paused()` stops admission into the batch and waits
until the running jobs finish: inside it the session is the caller's, for maintenance and for tests that
compare against the session directly.

Requests sent together start together. When nothing is decoding, the first request would otherwise start a
run of its own, and those arriving a millisecond later (the HTTP layer reads, validates and templates them one
by one, under the GIL the worker's step takes too) would wait for that whole run and then one more: 8 clients
starting at once got their first tokens after ~1 + 1 runs, p95 2.9-3.7x a lone request's. So an idle worker
holds a newcomer until no request has arrived for `gather` seconds (`note_arrival`, called as a request
enters the app, and `submit`), at most `GATHER_LIMIT` times that: a lone request waits `gather` once; a burst
starts in one run. Nothing is held while streams decode: newcomers join at the next step anyway, and a running
stream should not wait for them.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from onyxia.cli.llm.batch import Batch
from onyxia.cli.llm.session import LlmSession
from onyxia.cli.serve.generation import JobStream, job_streams
from onyxia.cli.serve.jobs import Failed, Job
from onyxia.cli.serve.metrics import Metrics
from onyxia.core import OnyxiaError

__all__ = ["GATHER_LIMIT", "Engine", "EngineClosed", "QueueFull"]

log = logging.getLogger(__name__)

GATHER_LIMIT = 10  # an idle worker holds a newcomer at most this many `gather` periods (a steady trickle)


class QueueFull(OnyxiaError):
    def __init__(self, waiting: int, retry_after: int) -> None:
        super().__init__(f"the server is busy: {waiting} requests are waiting; retry in {retry_after} s")
        self.retry_after = retry_after


class EngineClosed(OnyxiaError):
    """The server is shutting down: queued jobs are answered with this, new ones refused."""


class Engine:
    def __init__(
        self, session: LlmSession, max_queue: int, metrics: Metrics | None = None, gather: float = 0.0
    ) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue is {max_queue}; expected at least 1")
        if not 0 <= gather <= 1:
            raise ValueError(f"gather is {gather} s; expected 0 .. 1 s")
        self.session, self.max_queue, self.gather = session, max_queue, gather
        self._last_arrival = 0.0  # time.monotonic() of the latest note_arrival or submit
        self.metrics = metrics or Metrics()
        self.batch = self._new_batch()
        self._pending: deque[Job] = deque()  # admitted, not handed to the batch yet (no free slot, or paused)
        self._running: list[JobStream] = []  # in the batch (holding a slot or about to)
        self._cond = threading.Condition()
        self._paused = self._busy = self._closed = False
        self._seconds_per_job = 1.0  # moving average of a job's time in a slot: the Retry-After estimate
        self.metrics.slots_total.set(session.slots)
        self._thread = threading.Thread(target=self._serve, name="onyxia-serve-worker", daemon=True)
        self._thread.start()

    def _new_batch(self) -> Batch:
        batch = self.session.batch()
        batch.arrivals = self._arrived  # newcomers wait for no step run ahead
        return batch

    def _arrived(self) -> bool:
        """Whether jobs wait that the batch could take now (read by the worker, outside the condition: a
        `deque`'s length is read atomically)."""
        return bool(self._pending) and not self._paused

    @property
    def queue_depth(self) -> int:
        return len(self._pending)

    def note_arrival(self) -> None:
        """A generation request entered the app: an idle worker waits for it to be submitted (see `gather`).
        Called on the event loop; a float's assignment needs no lock."""
        self._last_arrival = time.monotonic()

    def submit(self, job: Job) -> None:
        """Admit `job`, or raise `QueueFull` / `EngineClosed`."""
        self._last_arrival = time.monotonic()
        with self._cond:
            if self._closed:
                raise EngineClosed("the server is shutting down")
            waiting = len(self._pending)
            if waiting >= self.max_queue:
                per_slot = self._seconds_per_job / self.session.slots
                raise QueueFull(waiting, max(1, math.ceil((waiting + 1) * per_slot)))
            self._pending.append(job)
            self.metrics.queue_depth.set(len(self._pending))
            self._cond.notify_all()

    @contextmanager
    def paused(self, timeout: float | None = None) -> Iterator[LlmSession]:
        """Stop handing jobs to the batch and wait for the running ones; the session is yours inside."""
        with self._cond:
            self._paused = True
            if not self._cond.wait_for(lambda: not self._busy and not self._running, timeout):
                self._paused = False
                self._cond.notify_all()
                raise TimeoutError(f"the jobs in progress did not finish within {timeout} s")
        try:
            yield self.session
        finally:
            with self._cond:
                self._paused = False
                self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Whether the queue emptied and the worker went idle within `timeout` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._busy and not self._pending and not self._running, timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Cancel the running jobs, refuse the queued ones, stop the worker."""
        with self._cond:
            self._closed = True
            dropped = list(self._pending)
            self._pending.clear()
            self.metrics.queue_depth.set(0)
            for run in self._running:
                run.stream.cancel()
            self._cond.notify_all()
        for job in dropped:
            job.emit(Failed(EngineClosed("the server shut down before this request ran")))
        self._thread.join(timeout)

    # ----- the worker ---------------------------------------------------------------------------
    def _serve(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(self._has_work)
                if not self._running:
                    self._gather()  # releases the condition while it waits: look again after it
                    if not self._has_work():
                        continue  # paused meanwhile
                if self._closed and not self._running:
                    return
                self._admit()
                self._busy = True
            try:
                self._step()
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _has_work(self) -> bool:
        return self._closed or bool(self._running) or (bool(self._pending) and not self._paused)

    def _gather(self) -> None:
        """Idle, with a newcomer: wait (releasing the condition) until no request has arrived for `gather`
        seconds, or `GATHER_LIMIT` such periods have passed (called holding the condition)."""
        limit = time.monotonic() + GATHER_LIMIT * self.gather
        while not self._closed:
            now = time.monotonic()
            until = min(self._last_arrival + self.gather, limit)
            if now >= until:
                return
            self._cond.wait(until - now)

    def _admit(self) -> None:
        """Hand queued jobs to the batch while it has free slots (called holding the condition)."""
        while self._pending and not self._paused and not self._closed and self._free_slots() >= self._needs():
            job = self._pending.popleft()
            runs = job_streams(job, self.session.tokenizer)  # n > 1: samples sharing the prompt's prefill
            try:
                self.batch.add_parallel([run.stream for run in runs])
            except Exception as e:  # a request the batch refuses is answered alone
                job.emit(Failed(e))
                continue
            self._running.extend(runs)
        self.metrics.queue_depth.set(len(self._pending))

    def _needs(self) -> int:
        """Slots the next queued job takes: one per sample (`n`)."""
        return self._pending[0].request.n

    def _free_slots(self) -> int:
        return self.session.slots - len(self._running)

    def _step(self) -> None:
        for run in self._running:
            if run.job.cancelled.is_set():
                run.stream.cancel()
        try:
            self.batch.step()
        except Exception as e:  # every row of the failed run shares its fate; the session stays usable
            if not isinstance(e, OnyxiaError):
                log.exception("generation failed")
            self._fail_all(e)
            return
        self._observe()

    def _observe(self) -> None:
        done = [run for run in self._running if run.stream.done]
        with self._cond:
            self._running = [run for run in self._running if not run.stream.done]
        for run in done:
            finished = run.finished()
            seconds = (run.stream.finished_at or 0.0) - run.stream.submitted
            self._seconds_per_job = 0.8 * self._seconds_per_job + 0.2 * seconds
            self.metrics.observe(finished)
            run.job.emit(finished)
        self.metrics.slots_active.set(len(self._running))
        self.metrics.kv_slots_in_use.set(self.batch.slots.cached)
        if self.batch.last_batch_size:
            self.metrics.batch_size.observe(self.batch.last_batch_size)
            self.batch.last_batch_size = 0

    def _fail_all(self, error: BaseException) -> None:
        with self._cond:
            failed, self._running = self._running, []
        self.session.reset()  # the failed step's rows are in no known state: start every slot over
        self.batch = self._new_batch()
        for run in failed:
            run.job.emit(Failed(error))
        self.metrics.slots_active.set(0)
