"""An axes-less Squeeze on a symbolic batch, the way PLCMOS (speechmos) ends: onnxruntime's shapes at each batch.

ONNX squeezes every dim that is 1 at run time, so ``Squeeze(ReduceMean(x[batch, 1, frames, 4]))`` is a 0-d
score for a batch of 1 and ``[batch]`` otherwise; the package reads it with ``float(session.run(...)[0])``.
The open compile records ``batch`` as a dim the plan needs static (`CompiledModel.static_required`), so the
session compiles per value of ``batch`` alone: ``frames`` stays a symbolic dim patched without a re-plan, and
each batch's variant is compiled once and reused.
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


def _score_model(path: Path) -> Path:
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=1),  # [batch, 1, 1, 1]
        helper.make_node("Squeeze", ["m"], ["score"]),  # axes-less: [batch], or [] where batch is 1
    ]
    inputs = [value("x", TensorProto.FLOAT, ["batch", 1, "frames", 4])]
    return save(make_model(nodes, inputs, [value("score", TensorProto.FLOAT, None)]), path)


def test_squeeze_of_a_symbolic_batch_gives_onnxruntime_shapes(tmp_path: Path) -> None:
    path = _score_model(tmp_path / "score.onnx")
    session, reference = ort.InferenceSession(path), onnxruntime.InferenceSession(str(path), providers=CPU)
    plan = session.executor.compiled
    assert "compiled per value of ['batch']" in plan.metadata["per_shape"]
    assert "Squeeze without axes" in plan.metadata["per_shape"]
    stats = session.executor.stats
    for batch, frames in [(1, 5), (2, 5), (1, 7), (2, 9), (3, 5)]:
        x = RNG.standard_normal((batch, 1, frames, 4)).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        (expected,) = reference.run(None, {"x": x})
        assert got.shape == expected.shape == (() if batch == 1 else (batch,)), (batch, frames)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert "frames" not in session.executor.compiled.dims  # only the batch compiles per value
    assert stats.replans == 3  # batches 1, 2 and 3: going back to 1 or 2 reuses its variant, frames patch


def test_a_batch_of_one_reads_as_a_python_float(tmp_path: Path) -> None:
    """What PLCMOS does with the score: a 0-d array converts; a (1,)-shaped one is deprecated in numpy."""
    path = _score_model(tmp_path / "score1.onnx")
    x = RNG.standard_normal((1, 1, 6, 4)).astype(np.float32)
    (score,) = ort.InferenceSession(path).run(["score"], {"x": x})
    assert score.shape == ()
    got = float(score)
    expected = float(onnxruntime.InferenceSession(str(path), providers=CPU).run(["score"], {"x": x})[0])
    assert abs(got - expected) <= 1e-6
