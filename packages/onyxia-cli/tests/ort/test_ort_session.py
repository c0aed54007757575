"""onyxia.ort.InferenceSession against onnxruntime on the same files: model sources, feeds, outputs,
metadata, symbolic dims bound without recompiling, per-shape variants, threads, two sessions."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from ort_models import make_model, value

import onyxia.ort as ort
from onyxia.core.settings import override

CPU = ["CPUExecutionProvider"]


def test_path_str_path_and_bytes_agree(add_mul: Path) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = onnxruntime.InferenceSession(str(add_mul), providers=CPU).run(None, {"x": x})
    for source in (str(add_mul), add_mul, add_mul.read_bytes()):
        got = ort.InferenceSession(source).run(None, {"x": x})
        assert len(got) == 2
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)


def test_external_data_beside_the_path(tmp_path: Path) -> None:
    bias = numpy_helper.from_array(np.linspace(-1, 1, 64, dtype=np.float32).reshape(16, 4), "bias")
    model = make_model(
        [helper.make_node("Add", ["x", "bias"], ["y"])],
        [value("x", TensorProto.FLOAT, ["n", 4])],
        [value("y", TensorProto.FLOAT, [16, 4])],
        [bias],
    )
    folder = tmp_path / "model_dir"
    folder.mkdir()
    path = folder / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, location="ext.bin", size_threshold=0)
    assert (folder / "ext.bin").is_file()
    x = np.ones((16, 4), np.float32)
    (expected,) = onnxruntime.InferenceSession(str(path), providers=CPU).run(None, {"x": x})
    (got,) = ort.InferenceSession(path).run(None, {"x": x})
    np.testing.assert_array_equal(got, expected)


def test_output_selection_order_and_lists(add_mul: Path) -> None:
    reference = onnxruntime.InferenceSession(str(add_mul), providers=CPU)
    session = ort.InferenceSession(str(add_mul))
    feed = {"x": [[1, 2, 3], [4, 5, 6]]}  # nested ints, converted to the declared float
    for names in (None, [], ["z"], ["z", "y"], ["y", "y"]):
        got = session.run(names, feed)
        expected = reference.run(names, feed)
        assert [a.dtype for a in got] == [b.dtype for b in expected]
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)


def test_zero_d_inputs_and_outputs_stay_zero_d(scalar_scale: Path) -> None:
    reference = onnxruntime.InferenceSession(str(scalar_scale), providers=CPU)
    session = ort.InferenceSession(str(scalar_scale))
    feed = {"x": np.arange(5, dtype=np.float32), "s": np.array(2.5, np.float32)}
    got, expected = session.run(None, feed), reference.run(None, feed)
    assert got[1].shape == expected[1].shape == ()
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_metadata_is_exactly_the_files(add_mul: Path) -> None:
    ours = ort.InferenceSession(add_mul).get_modelmeta()
    theirs = onnxruntime.InferenceSession(str(add_mul), providers=CPU).get_modelmeta()
    for field in ("producer_name", "graph_name", "domain", "description", "graph_description", "version"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert (
        ours.custom_metadata_map
        == theirs.custom_metadata_map
        == {
            "labels": "cat,dog",
            "producer_name": "a prop of that name",
        }
    )


def test_symbolic_dim_rebinds_without_recompiling(add_mul: Path) -> None:
    session = ort.InferenceSession(add_mul)
    stats = session.executor.stats
    created = (stats.shader_modules_created, stats.pipelines_created)  # all made in the constructor
    assert created[1] > 0
    for n in (2, 5, 1, 9, 5):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        y, z = session.run(None, {"x": x})
        np.testing.assert_array_equal(y, x + x)
        np.testing.assert_array_equal(z, x * x)
    assert (stats.shader_modules_created, stats.pipelines_created) == created
    assert stats.replans == stats.plan_switches == 0


def test_static_only_dim_compiles_once_per_value(same_conv: Path) -> None:
    reference = onnxruntime.InferenceSession(str(same_conv), providers=CPU)
    session = ort.InferenceSession(same_conv)
    stats = session.executor.stats
    seen = []
    for h, w in ((8, 8), (10, 6), (8, 8), (10, 6), (7, 9)):
        x = np.random.default_rng(h * w).standard_normal((1, 1, h, w)).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        (expected,) = reference.run(None, {"x": x})
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        seen.append(stats.replans)
    assert seen == [1, 2, 2, 2, 3]  # a new (h, w) compiles its variant once; a value seen before reuses it


def test_runs_from_threads_agree(add_mul: Path) -> None:
    session = ort.InferenceSession(add_mul)
    failures: list[str] = []

    def work(n: int) -> None:
        for step in range(8):
            x = np.full((n, 3), n + step, np.float32)
            y, z = session.run(None, {"x": x})
            if not (np.array_equal(y, x + x) and np.array_equal(z, x * x)):
                failures.append(f"thread n={n} step {step}")

    threads = [threading.Thread(target=work, args=(n,)) for n in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_sessions_share_one_runtime_compiled_for_it(add_mul: Path, same_conv: Path, monkeypatch) -> None:
    """Two sessions coexist on the process's one Runtime, and every compile (the constructor's and a
    per-shape variant's during a run) happens inside compiling_for(that runtime)."""
    import onyxia.ort.compiling as compiling
    import onyxia.ort.per_shape as per_shape

    entered = []
    real = compiling.compiling_for

    def counting(runtime):
        entered.append(runtime)
        return real(runtime)

    monkeypatch.setattr(compiling, "compiling_for", counting)
    monkeypatch.setattr(per_shape, "compiling_for", counting)  # where a per-shape variant compiles
    with override(plan_cache=False):  # a cache hit compiles nothing; a miss enters once more for the key
        first, second = ort.InferenceSession(add_mul), ort.InferenceSession(same_conv)
    assert first.executor.ctx is second.executor.ctx
    x = np.ones((2, 3), np.float32)
    image = np.ones((1, 1, 6, 6), np.float32)
    np.testing.assert_array_equal(first.run(["y"], {"x": x})[0], x + x)
    assert second.run(None, {"x": image})[0].shape == (1, 1, 3, 3)
    np.testing.assert_array_equal(first.run(["z"], {"x": x})[0], x * x)
    assert len(entered) == 3 and entered[0] is entered[1] is entered[2]


def test_overridable_initializer_feed_is_refused_clearly(tmp_path: Path) -> None:
    weight = numpy_helper.from_array(np.ones((2,), np.float32), "w")
    model = make_model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [value("x", TensorProto.FLOAT, [2]), value("w", TensorProto.FLOAT, [2])],
        [value("y", TensorProto.FLOAT, [2])],
        [weight],
    )
    session = ort.InferenceSession(model.SerializeToString())
    assert [a.name for a in session.get_overridable_initializers()] == ["w"]
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], x + 1)
    with pytest.raises(ort.NotImplemented, match="Overriding initializer 'w'"):
        session.run(None, {"x": x, "w": x})
