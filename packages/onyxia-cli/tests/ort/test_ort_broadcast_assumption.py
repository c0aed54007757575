"""Feeds that break a broadcast assumption of the open plan: ``x[a, 4] + y[b, 4]`` with ``a = 1, b = 3``.

The open compile takes two symbolic dims that meet in a broadcast as equal (exporters' graphs never
broadcast a symbolic 1 there) and records the equality as a run-time constraint; onnxruntime broadcasts
a 1 against the other. A session re-plans instead of refusing such a run: the constraint's dims are
compiled at their values (a variant, cached and reused), and a run whose dims are equal again goes back
to the open plan, which needs no compile at any equal size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
from onnx import TensorProto, helper
from ort_models import make_model, save, value

import onyxia.ort as ort

CPU = ["CPUExecutionProvider"]
RNG = np.random.default_rng(0)


def _add_model(path: Path) -> Path:
    nodes = [helper.make_node("Add", ["x", "y"], ["z"])]
    inputs = [value("x", TensorProto.FLOAT, ["a", 4]), value("y", TensorProto.FLOAT, ["b", 4])]
    return save(make_model(nodes, inputs, [value("z", TensorProto.FLOAT, None)]), path)


def _feeds(a: int, b: int) -> dict[str, np.ndarray]:
    return {"x": RNG.standard_normal((a, 4)).astype(np.float32), "y": RNG.standard_normal((b, 4)).astype(np.float32)}


def test_a_broadcast_the_open_plan_assumed_away_re_plans_and_matches_onnxruntime(tmp_path: Path) -> None:
    path = _add_model(tmp_path / "add.onnx")
    session, reference = ort.InferenceSession(path), onnxruntime.InferenceSession(str(path), providers=CPU)
    stats = session.executor.stats
    open_plan = session.executor.compiled
    assert open_plan.constraints and not open_plan.dims  # a == b, assumed and checked per run
    for a, b in [(3, 3), (5, 5)]:  # equal: the open plan, patched, never re-planned
        feeds = _feeds(a, b)
        np.testing.assert_allclose(session.run(None, feeds)[0], reference.run(None, feeds)[0], rtol=1e-6)
        assert session.executor.compiled is open_plan and stats.replans == 0
    for a, b in [(1, 3), (3, 1), (1, 3)]:  # onnxruntime broadcasts the 1: a variant per value, reused
        feeds = _feeds(a, b)
        got, expected = session.run(None, feeds)[0], reference.run(None, feeds)[0]
        assert got.shape == expected.shape == (3, 4)
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        assert session.executor.compiled.dims == {"a": a, "b": b}
    assert stats.replans == 2  # (1, 3) once, (3, 1) once; the second (1, 3) was reused
    feeds = _feeds(2, 2)  # equal again: back to the open plan, no compile
    np.testing.assert_allclose(session.run(None, feeds)[0], reference.run(None, feeds)[0], rtol=1e-6)
    assert session.executor.compiled is open_plan and stats.replans == 2


def test_dims_that_broadcast_nowhere_are_refused_as_onnxruntime_refuses_them(tmp_path: Path) -> None:
    path = _add_model(tmp_path / "add.onnx")
    session, reference = ort.InferenceSession(path), onnxruntime.InferenceSession(str(path), providers=CPU)
    feeds = _feeds(2, 3)
    try:
        reference.run(None, feeds)
    except Exception as e:  # onnxruntime's own refusal, for the class and first words
        expected = type(e).__name__
    else:
        raise AssertionError("onnxruntime broadcast 2 against 3")
    try:
        session.run(None, feeds)
    except Exception as e:
        assert type(e).__name__ == expected, f"{type(e).__name__}: {e}"
    else:
        raise AssertionError("Onyxia broadcast 2 against 3")
