"""`PlanExecutor.profile_run` (timestamp per dispatch, opt-in) and `gpu_bytes`, on lavapipe."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_plans import scale_plan

from onyxia.core import DeviceError
from onyxia.runtime import Runtime


@pytest.fixture(scope="module")
def profiling_runtime() -> Runtime:
    return Runtime(profiling=True)


def test_profile_run_times_every_dispatch_and_returns_run_outputs(profiling_runtime: Runtime) -> None:
    assert "timestamp-query" in profiling_runtime.features
    executor = profiling_runtime.load_model(scale_plan(["n"], expr="x[i] * 3.0"))
    x = np.arange(1000, dtype=np.float32)
    normal = executor.run({"x": x})
    profile = executor.profile_run({"x": x})
    np.testing.assert_array_equal(profile.outputs["y"], normal["y"])
    assert len(profile.dispatches) == executor.stats.dispatches_encoded == 1
    (only,) = profile.dispatches
    assert (only.node, only.op_type) == ("custom_node", "Custom")
    assert only.gpu_ns > 0 and profile.gpu_ns == only.gpu_ns
    assert profile.host_encode_ns > 0 and profile.host_ns >= profile.host_encode_ns


def test_profile_run_follows_new_dims(profiling_runtime: Runtime) -> None:
    executor = profiling_runtime.load_model(scale_plan(["n"]))
    for n in (7, 70_000):
        x = np.ones(n, np.float32)
        np.testing.assert_array_equal(executor.profile_run({"x": x}).outputs["y"], x * 2)


def test_profile_run_needs_the_timestamp_feature(runtime: Runtime) -> None:
    if "timestamp-query" in runtime.features:
        pytest.fail("Runtime() must not ask for timestamp-query unless profiling=True")
    executor = runtime.load_model(scale_plan([4]))
    with pytest.raises(DeviceError, match=r"timestamp-query.*Runtime\(profiling=True\)"):
        executor.profile_run({"x": np.ones(4, np.float32)})


def test_gpu_bytes_counts_storage_and_staging(runtime: Runtime) -> None:
    executor = runtime.load_model(scale_plan([1024]))
    executor.run({"x": np.ones(1024, np.float32)})
    assert executor.gpu_bytes >= 3 * 4096  # x, y and the readback staging copy of y
    executor.release()
    assert executor.gpu_bytes == 0
