"""End-to-end runs of small hand-written plans on lavapipe, compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_plans import scale_plan

from onyxia.core import DataType, InputError
from onyxia.runtime import Runtime


def test_static_dims(any_runtime: Runtime) -> None:
    executor = any_runtime.load_model(scale_plan([4, 3]))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = executor.run({"x": x})
    np.testing.assert_array_equal(out["y"], x * 2)
    assert out["y"].shape == (4, 3) and out["y"].dtype == np.float32


def test_symbolic_dims_bound_from_inputs(any_runtime: Runtime) -> None:
    executor = any_runtime.load_model(scale_plan(["batch", 3]))
    assert executor.stats.dimension_updates == 0  # nothing to evaluate until a run binds 'batch'
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_array_equal(executor.run({"x": x})["y"], x * 2)
    assert executor.dims == {"batch": 5}


def test_immediates_and_uniform_paths_agree(runtime: Runtime, uniform_runtime: Runtime) -> None:
    assert runtime.use_immediates and not uniform_runtime.use_immediates
    plan = scale_plan(["n"], expr="x[i] * 3.0 + 1.0")
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    a = runtime.load_model(plan).run({"x": x})["y"]
    b = uniform_runtime.load_model(plan).run({"x": x})["y"]
    np.testing.assert_array_equal(a, b)
    # x * 3 rounded then + 1 rounded (lavapipe), or one fused multiply-add (WGSL lets a GPU contract them: an
    # H200 does), which float64 computes exactly here and rounds once; near zero the two differ by far more
    # than a relative tolerance of the result allows
    unfused = x * np.float32(3) + np.float32(1)
    fused = (x.astype(np.float64) * 3 + 1).astype(np.float32)
    assert np.all((a == unfused) | (a == fused)), "neither x * 3 + 1 rounded twice nor once"


def test_dims_change_grows_buffers_without_recompiling(any_runtime: Runtime) -> None:
    executor = any_runtime.load_model(scale_plan(["n"]))
    rng = np.random.default_rng(1)
    stats_small: tuple[int, int] | None = None
    for n in (100, 40):
        x = rng.standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(executor.run({"x": x})["y"], x * 2)
        if stats_small is not None:  # shrinking kept every buffer and bind group
            assert stats_small == (executor.stats.buffers_created, executor.stats.bind_groups_created)
        stats_small = (executor.stats.buffers_created, executor.stats.bind_groups_created)
    x = rng.standard_normal(5000).astype(np.float32)
    np.testing.assert_array_equal(executor.run({"x": x})["y"], x * 2)
    stats = executor.stats
    assert stats_small is not None
    assert stats.shader_modules_created == 1 and stats.pipelines_created == 1
    assert stats.buffers_created > stats_small[0]  # x and y outgrew their buffers
    assert stats.bind_groups_created == stats_small[1] + 1  # only the one dispatch was rebound
    assert stats.dimension_updates == 3 and stats.runs == 3


def test_smaller_dims_reuse_buffers_and_bind_groups(runtime: Runtime) -> None:
    executor = runtime.load_model(scale_plan(["n"]), dims={"n": 64})
    before = (executor.stats.buffers_created, executor.stats.bind_groups_created)
    executor.update_dimensions({"n": 10})
    assert (executor.stats.buffers_created, executor.stats.bind_groups_created) == before
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(executor.run({"x": x})["y"], x * 2)


def test_explicit_update_dimensions_then_run(runtime: Runtime) -> None:
    executor = runtime.load_model(scale_plan(["n"]), dims={"n": 8})
    assert executor.stats.dimension_updates == 1  # evaluated at load: every symbol was given
    executor.update_dimensions({"n": 20})
    x = np.arange(20, dtype=np.float32)
    np.testing.assert_array_equal(executor.run({"x": x})["y"], x * 2)
    assert executor.stats.dimension_updates == 2  # the run found the dims already set


def test_max_dims_preallocates(runtime: Runtime) -> None:
    executor = runtime.load_model(scale_plan(["n"]), max_dims={"n": 4096})
    created = executor.stats.buffers_created
    for n in (1, 4096, 300):
        x = np.full(n, 1.5, np.float32)
        np.testing.assert_array_equal(executor.run({"x": x})["y"], x * 2)
    assert executor.stats.buffers_created == created  # the staging buffer was sized at load too


def test_int64_round_trip(any_runtime: Runtime) -> None:
    executor = any_runtime.load_model(scale_plan(["n"], DataType.INT64, "x[i] * 2 - 1"))
    x = np.array([-(2**29), -5, 0, 7, 2**29], dtype=np.int64)
    out = executor.run({"x": x})["y"]
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, x * 2 - 1)


def test_int64_out_of_range_is_refused(runtime: Runtime) -> None:
    executor = runtime.load_model(scale_plan(["n"], DataType.INT64, "x[i]"))
    with pytest.raises(InputError, match=r"input 'x': int64 values range over \[0, 1099511627776\]"):
        executor.run({"x": np.array([0, 2**40], dtype=np.int64)})


def test_bool_output(runtime: Runtime) -> None:
    plan = scale_plan(["n"], DataType.FLOAT, "select(0u, 1u, x[i] > 0.5)", DataType.BOOL)
    x = np.array([0.0, 0.7, 0.5, 2.0], dtype=np.float32)
    out = runtime.load_model(plan).run({"x": x})["y"]
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, x > 0.5)


def test_bool_and_int8_inputs_widen(runtime: Runtime) -> None:
    flags = np.array([True, False, True])
    out = runtime.load_model(scale_plan([3], DataType.BOOL, "1u - x[i]")).run({"x": flags})["y"]
    np.testing.assert_array_equal(out, ~flags)
    small = np.array([-64, -1, 0, 63], dtype=np.int8)
    out = runtime.load_model(scale_plan([4], DataType.INT8, "x[i] * 2")).run({"x": small})["y"]
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, small * 2)


def test_float16_odd_length(runtime: Runtime) -> None:
    plan = scale_plan(["n"], DataType.FLOAT16, "x[i] * 2.0h", header="enable f16;")
    assert "shader-f16" in plan.required_features
    x = np.array([0.5, -1.25, 3.0, 7.5, 100.0], dtype=np.float16)
    out = runtime.load_model(plan).run({"x": x})["y"]
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, x * 2)


def test_zero_size_tensors(any_runtime: Runtime) -> None:
    executor = any_runtime.load_model(scale_plan(["n", 3]))
    with pytest.raises(InputError, match="no dims are bound yet"):
        executor.live_dispatches()
    out = executor.run({"x": np.zeros((0, 3), np.float32)})["y"]
    assert out.shape == (0, 3) and executor.stats.dispatches_encoded == 0 and executor.live_dispatches() == []
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(executor.run({"x": x})["y"], x * 2)
    assert executor.stats.dispatches_encoded == 1
    assert executor.live_dispatches() == [
        (executor.compiled.operations[0].name, executor.compiled.operations[0].op_type)
    ]
    static = any_runtime.load_model(scale_plan([0]))
    assert static.run({"x": np.zeros(0, np.float32)})["y"].shape == (0,)


def test_workgroups_beyond_the_limit_are_split(runtime: Runtime) -> None:
    limit = runtime.limits["max-compute-workgroups-per-dimension"]
    n = limit + 4465  # 70000 on lavapipe: one thread per workgroup, so x alone cannot hold them
    plan = scale_plan(["n"], DataType.UINT32, "x[i] + 1u", workgroup=1)
    x = np.arange(n, dtype=np.uint32)
    out = runtime.load_model(plan).run({"x": x})["y"]
    np.testing.assert_array_equal(out, x + 1)
