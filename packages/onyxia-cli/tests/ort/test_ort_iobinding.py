"""OrtValues and IOBinding: values that stay on the GPU between runs, as onnxruntime's WebGPU users keep a
KV cache, checked against the same loop run with onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
import pytest

import onyxia.ort as ort


def test_ortvalue_round_trips_on_both_devices() -> None:
    for array in (np.arange(6, dtype=np.float32).reshape(2, 3), np.array([3, -4], np.int64), np.array(True)):
        for device in ("cpu", "webgpu"):
            value = ort.OrtValue.ortvalue_from_numpy(array, device, 0)
            theirs = onnxruntime.OrtValue.ortvalue_from_numpy(array)
            assert value.device_name() == device
            assert value.shape() == theirs.shape()
            assert value.data_type() == theirs.data_type()
            assert value.element_type() == theirs.element_type()
            np.testing.assert_array_equal(value.numpy(), array)
            assert value.numpy().dtype == array.dtype
    with pytest.raises(RuntimeError, match="Unsupported device type: cuda"):
        ort.OrtValue.ortvalue_from_numpy(np.ones(2, np.float32), "cuda", 0)


def test_kv_cache_loop_stays_on_the_gpu(kv_step: Path) -> None:
    """present -> past each step through bind_ortvalue_input: the cache never goes through the host,
    and every step's outputs equal onnxruntime's loop (which carries the cache as numpy arrays)."""
    rng = np.random.default_rng(3)
    tokens = [rng.standard_normal((1, 1, 4)).astype(np.float32) for _ in range(5)]
    reference = onnxruntime.InferenceSession(str(kv_step), providers=["CPUExecutionProvider"])
    past = np.zeros((1, 0, 4), np.float32)
    expected = []
    for x in tokens:
        present, total = reference.run(None, {"past": past, "x": x})
        expected.append(total)
        past = present

    session = ort.InferenceSession(kv_step)
    binding = session.io_binding()
    cache = ort.OrtValue.ortvalue_from_numpy(np.zeros((1, 0, 4), np.float32), "webgpu", 0)
    stats = session.executor.stats
    for step, x in enumerate(tokens):
        binding.bind_ortvalue_input("past", cache)
        binding.bind_cpu_input("x", x)
        binding.bind_output("present", "webgpu")
        binding.bind_output("total", "cpu")
        read_before = stats.bytes_read_back
        session.run_with_iobinding(binding)
        assert stats.bytes_read_back == read_before  # nothing went through the plan's readback
        cache, total = binding.get_outputs()
        assert cache.device_name() == "webgpu" and cache.shape() == [1, step + 1, 4]
        assert total.device_name() == "cpu"
        np.testing.assert_allclose(total.numpy(), expected[step], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(cache.numpy(), past)
    np.testing.assert_allclose(binding.copy_outputs_to_cpu()[1], expected[-1], rtol=1e-6, atol=1e-6)
    assert stats.replans == 0  # the growing cache length stayed a symbolic dim


def test_run_with_ort_values_and_device_feeds_in_run(kv_step: Path) -> None:
    session = ort.InferenceSession(kv_step)
    past = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
    x = np.ones((1, 1, 4), np.float32)
    expected = onnxruntime.InferenceSession(str(kv_step), providers=["CPUExecutionProvider"]).run(
        None, {"past": past, "x": x}
    )
    on_gpu = ort.OrtValue.ortvalue_from_numpy(past, "webgpu", 0)
    values = session.run_with_ort_values(None, {"past": on_gpu, "x": ort.OrtValue.ortvalue_from_numpy(x)})
    arrays = session.run(["total", "present"], {"past": on_gpu, "x": x})
    for got, want in zip(values, expected, strict=True):
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(arrays[0], expected[1])
    np.testing.assert_array_equal(arrays[1], expected[0])


def test_bind_ortvalue_output_writes_into_the_given_value(kv_step: Path) -> None:
    session = ort.InferenceSession(kv_step)
    binding = session.io_binding()
    binding.bind_cpu_input("past", np.ones((1, 1, 4), np.float32))
    binding.bind_cpu_input("x", np.full((1, 1, 4), 2, np.float32))
    target = ort.OrtValue.ortvalue_from_shape_and_type([1, 1, 4], np.float32, "webgpu", 0)
    binding.bind_ortvalue_output("total", target)
    session.run_with_iobinding(binding)
    (out,) = binding.get_outputs()
    assert out is target
    np.testing.assert_array_equal(target.numpy(), np.full((1, 1, 4), 3, np.float32))
    binding.clear_binding_outputs()
    binding.clear_binding_inputs()
    with pytest.raises(ValueError, match="Required inputs"):
        session.run_with_iobinding(binding)
