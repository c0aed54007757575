"""What `onyxia.ort.InferenceSession.run()` adds over `PlanExecutor.run()` on the same plan.

A one-Add model (x[n, 3] + x) is run many times both ways on the session's own executor, alternating
in rounds so both see the same machine load; the medians and their ratio are printed (issue 24's
target: the session at most 1.5x the executor). Usage: ``python tools/ort_overhead.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

import onyxia.ort as ort


def one_add_model() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])],
        "one_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model.SerializeToString()


def timed(call, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="runs per way (default 2000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (default 10)")
    args = parser.parse_args()
    session = ort.InferenceSession(one_add_model())
    executor = session.executor
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    feed = {"x": x}
    np.testing.assert_array_equal(session.run(None, feed)[0], executor.run(feed)["y"])
    timed(lambda: session.run(None, feed), 200)  # warm both paths
    timed(lambda: executor.run(feed), 200)
    ours: list[float] = []
    base: list[float] = []
    per_round = max(1, args.runs // args.rounds)
    for _ in range(args.rounds):
        base += timed(lambda: executor.run(feed), per_round)
        ours += timed(lambda: session.run(None, feed), per_round)
    session_ms, executor_ms = statistics.median(ours) * 1e3, statistics.median(base) * 1e3
    print(f"PlanExecutor.run        median {executor_ms:.4f} ms over {len(base)} runs")
    print(f"InferenceSession.run    median {session_ms:.4f} ms over {len(ours)} runs")
    print(
        f"ratio {session_ms / executor_ms:.3f}x (target <= 1.5x); session overhead {1e3 * (session_ms - executor_ms):.1f} us"
    )


if __name__ == "__main__":
    main()
