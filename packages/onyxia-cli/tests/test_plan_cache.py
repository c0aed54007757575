"""The compiled-plan cache in one process: a cached plan runs as the fresh one does (symbolic dims patched,
a compiled dim re-planned by the lazy replanner), external data is referenced and checked, a corrupted
entry is ignored and rewritten, and every input of the key changes it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import ort_run
from onnx import TensorProto, helper, numpy_helper

from onyxia.cli.plan_cache import STATS, PlanStore, compile_cached, plan_key, plans_dir
from onyxia.cli.plan_cache import key as key_module
from onyxia.core.adapter_facts import AdapterFacts, target_adapter
from onyxia.core.plan_io import PlanFormatError, read_plan
from onyxia.core.settings import override, settings
from onyxia.core.values import TensorValue


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    with override(cache_dir=tmp_path / "cache", plan_cache=True):
        yield plans_dir(settings())


@pytest.fixture
def runtime():  # type: ignore[no-untyped-def]
    from onyxia.runtime import Runtime

    return Runtime()


def _affine(path: Path, external: bool = False, scale: float = 1.0) -> Path:
    """y = (x * w + b) over x [N, 8]: two elementwise shaders; N symbolic."""
    w = numpy_helper.from_array((np.arange(8, dtype=np.float32) * scale).reshape(1, 8), "w")
    b = numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8), "b")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
        "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    if external:
        onnx.save(model, path, save_as_external_data=True, location=f"{path.name}.data", size_threshold=0)
    else:
        onnx.save(model, path)
    return path


def _array(data: TensorValue | np.ndarray | None) -> np.ndarray:
    assert data is not None
    return data.numpy() if isinstance(data, TensorValue) else data


def _x(n: int) -> np.ndarray:
    return np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)


def test_cached_plan_with_a_symbolic_dim_runs_as_the_fresh_one(tmp_path: Path, cache: Path, runtime) -> None:  # type: ignore[no-untyped-def]
    model = _affine(tmp_path / "affine.onnx")
    before = (STATS.hits, STATS.misses)
    fresh = compile_cached(model, {}, runtime)
    cached = compile_cached(model, {}, runtime)
    assert (STATS.hits - before[0], STATS.misses - before[1]) == (1, 1)
    assert cached.operations == fresh.operations and cached.shaders == fresh.shaders
    for n in (3, 5):  # N stays symbolic: patched, never re-planned
        expected = ort_run(model, {"x": _x(n)})["y"]
        for plan in (fresh, cached):
            np.testing.assert_allclose(runtime.load_model(plan).run({"x": _x(n)})["y"], expected, rtol=1e-6)


def test_a_compiled_dim_that_moves_is_replanned_by_the_lazy_replanner(tmp_path: Path, cache: Path, runtime) -> None:  # type: ignore[no-untyped-def]
    model = _affine(tmp_path / "affine.onnx")
    compile_cached(model, {"N": 2}, runtime)
    cached = compile_cached(model, {"N": 2}, runtime)
    assert type(cached.replanner).__name__ == "LazyReplanner"
    assert cached.replanner.input_dims["x"][1] == 8
    executor = runtime.load_model(cached)
    replans = STATS.replans
    np.testing.assert_allclose(executor.run({"x": _x(2)})["y"], ort_run(model, {"x": _x(2)})["y"], rtol=1e-6)
    assert STATS.replans == replans  # the cached plan ran as it is
    np.testing.assert_allclose(executor.run({"x": _x(3)})["y"], ort_run(model, {"x": _x(3)})["y"], rtol=1e-6)
    assert STATS.replans == replans + 1  # N moved: parsed and compiled once, then re-planned


def test_external_data_is_referenced_and_a_rewritten_data_file_is_a_miss(tmp_path: Path, cache: Path) -> None:
    model = _affine(tmp_path / "affine.onnx", external=True)
    plan = compile_cached(model, {"N": 4})
    compile_cached(model, {"N": 4})
    (entry,) = PlanStore(cache).entries()
    assert entry.note["data_files"] == [str((tmp_path / "affine.onnx.data").resolve())]
    loaded, _ = read_plan(entry.path)
    weights = [_array(t.data) for t in loaded.tensors.values() if t.data is not None]
    assert weights and all(getattr(w, "filename", None) for w in weights)  # mapped from the data file, not copied
    _affine(tmp_path / "affine.onnx", external=True, scale=2.0)  # same graph bytes, new weights
    misses = STATS.misses
    again = compile_cached(model, {"N": 4})
    assert STATS.misses == misses + 1
    w = next(_array(t.data) for t in again.tensors.values() if t.name == "w")
    old = next(_array(t.data) for t in plan.tensors.values() if t.name == "w")
    np.testing.assert_array_equal(w, np.arange(8, dtype=np.float32).reshape(1, 8) * 2)
    assert not np.array_equal(w, old)


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_a_corrupted_entry_is_ignored_and_rewritten(tmp_path: Path, cache: Path, damage: str) -> None:
    model = _affine(tmp_path / "affine.onnx")
    compile_cached(model, {"N": 2})
    (entry,) = PlanStore(cache).entries()
    data = bytearray(entry.path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    entry.path.write_bytes(
        bytes(data[: len(data) // 2] if damage == "truncate" else b"" if damage == "empty" else data)
    )
    with pytest.raises(PlanFormatError):
        read_plan(entry.path)
    rejected, writes = STATS.rejected, STATS.writes
    plan = compile_cached(model, {"N": 2})
    assert (STATS.rejected, STATS.writes) == (rejected + 1, writes + 1)
    reread, _ = read_plan(entry.path)  # whole again
    assert reread.operations == plan.operations


def test_every_part_of_the_key_changes_it(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _affine(tmp_path / "affine.onnx")
    base = plan_key(model, {"N": 2}, settings())
    assert plan_key(model, {"N": 2}, settings()).digest == base.digest
    with target_adapter(AdapterFacts(cpu=False, subgroups=True, subgroup_min_size=32, subgroup_max_size=32)):
        assert plan_key(model, {"N": 2}, settings()).digest != base.digest
    assert plan_key(model, {"N": 2}, settings(), facts=AdapterFacts(shader_f16=True)).digest != base.digest
    assert plan_key(model, {"N": 3}, settings()).digest != base.digest
    assert plan_key(model, {"N": 2}, settings(), passes=["llm-session"]).digest != base.digest
    with override(max_binding_bytes=1 << 20):  # the device limits planning splits weights by
        assert plan_key(model, {"N": 2}, settings()).digest != base.digest
    assert plan_key(model.read_bytes(), {"N": 2}, settings()).digest != base.digest  # bytes: no folder
    monkeypatch.setattr(key_module, "code_fingerprint", lambda: "another onyxia version")
    assert plan_key(model, {"N": 2}, settings()).digest != base.digest


def test_a_changed_adapter_or_version_compiles_again(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _affine(tmp_path / "affine.onnx")
    compile_cached(model, {"N": 2})
    misses = STATS.misses
    with target_adapter(AdapterFacts(shader_f16=True)):
        compile_cached(model, {"N": 2})
    monkeypatch.setattr(key_module, "code_fingerprint", lambda: "onyxia 9.9")
    compile_cached(model, {"N": 2})
    assert STATS.misses == misses + 2
    assert len(PlanStore(cache).entries()) == 3


def test_the_least_recently_used_plans_go_when_the_cache_is_over_its_limit(tmp_path: Path, cache: Path) -> None:
    """Three plans of one model at three dims with room for about two: the one used longest ago goes (the
    first was used again after the second was written, so the second goes), and the limit setting itself is
    not part of the key."""
    model = _affine(tmp_path / "affine.onnx")
    compile_cached(model, {"N": 2})
    (first,) = PlanStore(cache).entries()
    compile_cached(model, {"N": 3})
    (second,) = [e for e in PlanStore(cache).entries() if e.path != first.path]
    os.utime(second.path, (1, 1))  # the second is now the older use; the hit below touches the first
    hits = STATS.hits
    with override(plan_cache_mb=1):  # a few-KiB entry fits: nothing goes, and the key is the same
        compile_cached(model, {"N": 2})
    assert STATS.hits == hits + 1
    compile_cached(model, {"N": 4})
    store = PlanStore(cache, 2 * first.size + first.size // 2)
    assert store.evict() == 1
    remaining = {e.path for e in store.entries()}
    assert first.path in remaining and second.path not in remaining and len(remaining) == 2
    assert not second.path.with_suffix(".json").exists()


def test_the_cache_is_off_when_settings_say_so(tmp_path: Path, cache: Path) -> None:
    model = _affine(tmp_path / "affine.onnx")
    for changes in ({"plan_cache": False}, {"check": True}, {"dump_ir": tmp_path / "ir"}):
        with override(**changes):
            compile_cached(model, {"N": 2})
    assert PlanStore(cache).entries() == []


def test_cache_info_and_clear(tmp_path: Path, cache: Path, cli) -> None:  # type: ignore[no-untyped-def]
    model = _affine(tmp_path / "affine.onnx")
    compile_cached(model, {"N": 2})
    info = cli("cache", "info")
    assert info.code == 0 and "1 plan(s)" in info.out and "affine.onnx" in info.out and "N=2" in info.out
    cleared = cli("cache", "clear")
    assert cleared.code == 0 and "removed 1 cached plan(s)" in cleared.out
    assert "0 plan(s)" in cli("cache", "info").out and not list(cache.iterdir())
