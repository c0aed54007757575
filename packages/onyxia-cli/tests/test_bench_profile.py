"""Profile mode: per-op GPU times from timestamp queries cover every dispatch of a decode step."""

from __future__ import annotations

import pytest
from llm_cases import DATA

from onyxia.cli.bench.onyxia_runner import OnyxiaRunner, summarize_profiles
from onyxia.runtime.profiling import DispatchTime, RunProfile


@pytest.fixture(scope="module")
def runner() -> OnyxiaRunner:
    runner = OnyxiaRunner(DATA / "gemma3-tiny", "q4", profile=True, profile_steps=3)
    runner.load()
    return runner


def test_profile_covers_every_dispatch_of_a_decode_step(runner: OnyxiaRunner) -> None:
    session = runner.loaded
    executor = session.executor
    plain = [runner.first_token([2, 10, 11, 12]), *runner.decode(runner._last, 1)]
    encoded = executor.stats.dispatches_encoded
    profiles: list[RunProfile] = []
    session.reset()
    session.profiles = profiles
    try:
        profiled = [runner.first_token([2, 10, 11, 12]), *runner.decode(runner._last, 1)]
    finally:
        session.profiles = None
    assert profiled == plain  # profiling changes timing, never results
    decode = profiles[-1]
    assert len(decode.dispatches) == encoded
    op_types = {op.name: op.op_type for op in executor.compiled.operations}
    assert all(op_types[d.node] == d.op_type and d.gpu_ns >= 0 for d in decode.dispatches)
    assert decode.gpu_ns > 0 and decode.host_encode_ns > 0
    assert {"MatMulNBits", "GroupQueryAttention"} <= {d.op_type for d in decode.dispatches}


def test_runner_extras_summarize_the_profile(runner: OnyxiaRunner) -> None:
    executor = runner.loaded.executor
    runner.first_token([2, 10, 11])
    extras = runner.extras()
    profile = extras["profile"]
    assert runner.loaded.executor is executor
    assert runner.loaded.profiles is None  # profiling was on only for the profiled steps
    assert extras["gpu_bytes"] == executor.gpu_bytes > 0
    assert profile["steps"] == 3 and profile["dispatches_per_step"] > 0
    assert sum(row["dispatches"] for row in profile["by_op_type"]) == profile["dispatches_per_step"]
    assert sum(row["share"] for row in profile["by_op_type"]) == pytest.approx(1.0)
    assert profile["host_encode_ms_per_step"] > 0 and profile["gpu_ms_per_step"] > 0
    assert profile["host_dims_ms_per_step"] > 0  # each decode step moves the cache length


def test_summary_keeps_the_top_ops_in_order() -> None:
    dispatches = [DispatchTime(f"n{i}", f"Op{i % 30}", 1000 * (i + 1)) for i in range(60)]
    profiles = [RunProfile({}, dispatches, 100, 200), RunProfile({}, dispatches, 300, 400)]
    summary = summarize_profiles(profiles, top=20)
    assert len(summary["by_op_type"]) == len(summary["by_node"]) == 20
    assert summary["by_node"][0] == {
        "node": "n59",
        "op_type": "Op29",
        "gpu_ms": 0.06,
        "share": pytest.approx(0.06 / 1.83),
    }
    assert summary["by_op_type"][0]["op_type"] == "Op29" and summary["by_op_type"][0]["dispatches"] == 2
    assert summary["host_prepare_ms_per_step"] == pytest.approx(0.0002)
    assert summary["gpu_ms_per_step"] == pytest.approx(1.83)
