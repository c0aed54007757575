"""Weight upload in slices: the data arrives whole, and memory-mapped pages leave the process once written."""

from pathlib import Path

import numpy as np
import pytest
from runtime_plans import ElementwiseSpec, build_plan
from test_runtime_steps import GATHER_WGSL

from onyxia.core import DataType, PlanCtx, TensorDef, TensorKind, TensorValue, ceil_div, shape_of
from onyxia.core.values import release_file_pages
from onyxia.runtime import Runtime
from onyxia.runtime import upload as upload_module

PAGE = 4096


def _resident_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of `path` (from /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            inside = fields[-1] == str(path)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1])
    return total


def _mapped_weight(tmp_path: Path, count: int) -> tuple[Path, np.memmap]:
    path = tmp_path / "weights.bin"
    np.arange(count, dtype=np.float32).tofile(path)
    return path, np.memmap(path, dtype=np.float32, mode="r")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc to observe residency")
def test_release_file_pages_drops_only_the_given_range(tmp_path: Path) -> None:
    path, mapped = _mapped_weight(tmp_path, 64 * PAGE)  # 256 pages of float32
    assert float(mapped.sum()) > 0  # touch every page
    resident = _resident_kib(path)
    assert resident >= 200 * PAGE // 1024
    release_file_pages(mapped[: 32 * PAGE])  # the first half
    assert _resident_kib(path) <= resident // 2 + 8
    release_file_pages(np.asarray(mapped[32 * PAGE :]).reshape(-1, 64))  # a plain ndarray view of the rest
    assert _resident_kib(path) <= 8
    assert float(mapped[-1]) == 64 * PAGE - 1  # the mapping still reads, from the file


def test_release_file_pages_ignores_arrays_in_memory() -> None:
    array = np.arange(1024, dtype=np.float32)
    release_file_pages(array)
    assert array[-1] == 1023


def test_weights_upload_whole_across_many_slices(
    any_runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upload_module, "SLICE_BYTES", 1024)  # 12 KiB of weights: a dozen slices and drains
    count = 3072
    path, mapped = _mapped_weight(tmp_path, count)
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, [count])
    value = TensorValue(DataType.FLOAT, (count,), lambda: mapped, name="w")  # lazy and file-backed, like ONNX data
    weight: TensorDef = spec.graph.add_tensor(
        "w", DataType.FLOAT, shape_of((count,)), TensorKind.INITIALIZER, initializer=value
    )
    spec.output("y", DataType.FLOAT, [count])

    def plan(ctx: PlanCtx) -> None:
        shader = ctx.compile_shader("gather", GATHER_WGSL, {"T": "f32", "EXPR": "x[i] + w[i]"}, {"N": count})
        ctx.dispatch(shader, [ctx.input(0), ctx.input(1)], [ctx.output(0)], ceil_div(count, 64))

    executor = any_runtime.load_model(build_plan(spec, plan, [weight]))
    x = np.full(count, 0.5, np.float32)
    np.testing.assert_array_equal(executor.run({"x": x})["y"], np.arange(count, dtype=np.float32) + 0.5)
    if Path("/proc/self/smaps").exists():
        assert _resident_kib(path) <= 8  # uploaded, then dropped from this process


def test_uploaded_values_give_back_what_they_can_reload(runtime: Runtime) -> None:
    loads = []

    def repack() -> np.ndarray:  # stands for a derived constant, e.g. 4-bit weights repacked as u32 words
        loads.append(1)
        return np.arange(64, dtype=np.float32)

    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, [64])
    value = TensorValue(DataType.FLOAT, (64,), repack, name="w")
    weight = spec.graph.add_tensor("w", DataType.FLOAT, shape_of((64,)), TensorKind.INITIALIZER, initializer=value)
    spec.output("y", DataType.FLOAT, [64])

    def plan(ctx: PlanCtx) -> None:
        shader = ctx.compile_shader("gather", GATHER_WGSL, {"T": "f32", "EXPR": "x[i] * w[i]"}, {"N": 64})
        ctx.dispatch(shader, [ctx.input(0), ctx.input(1)], [ctx.output(0)], 1)

    executor = runtime.load_model(build_plan(spec, plan, [weight]))
    assert not value.is_loaded and loads == [1]  # uploaded, then the host copy dropped
    np.testing.assert_array_equal(executor.run({"x": np.ones(64, np.float32)})["y"], np.arange(64, dtype=np.float32))
    assert value.numpy()[-1] == 63 and loads == [1, 1]  # loads again on demand
