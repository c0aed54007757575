"""One executor shared by threads: 4 threads x 50 `run()` calls, each with its own input sizes (so dims
move between calls), every result equal to the single-thread result. Before the executor serialised
its calls, two threads killed the process or read each other's staging buffer."""

from __future__ import annotations

import threading

import numpy as np
from runtime_plans import scale_plan

from onyxia.runtime import Runtime

THREADS, RUNS = 4, 50


def test_four_threads_share_one_executor(runtime: Runtime) -> None:
    executor = runtime.load_model(scale_plan(["n", 3], expr="x[i] * 3.0 + 1.0"))
    rng = np.random.default_rng(0)
    feeds = [
        [rng.standard_normal((1 + (t * RUNS + k) % 7, 3)).astype(np.float32) for k in range(RUNS)]
        for t in range(THREADS)
    ]
    expected = [[executor.run({"x": x})["y"] for x in mine] for mine in feeds]  # one thread first
    results: list[list[np.ndarray]] = [[] for _ in range(THREADS)]
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(t: int) -> None:
        try:
            start.wait()
            results[t] = [executor.run({"x": x})["y"] for x in feeds[t]]
        except BaseException as e:  # surfaced below with the thread's results
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and not any(thread.is_alive() for thread in threads), errors
    for t in range(THREADS):
        for got, want in zip(results[t], expected[t], strict=True):
            np.testing.assert_array_equal(got, want)
    assert executor.stats.runs == 2 * THREADS * RUNS
