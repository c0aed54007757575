"""Symbolic dims the way the packaged models have them, each failure class on a tiny model.

- PP-OCRv4 det: an FPN upsamples maps whose H and W are symbolic by integer scales; the open compile used to
  fail, the fallback plan then failed at load (its dims UNSPECIALIZED, -1, evaluated into input sizes).
- A plan that must wait for a dim (here a Resize by 1.5, inexact on a symbolic size) with an odd number of
  waiting dims: the load must not size anything by -1.
- PP-OCRv4 rec / det, a face detector's image pyramid: Convs over symbolic H and W used to run the direct kernel
  open (7-10x slower than the tiled rows on lavapipe), so the session compiled one plan per image size; the
  tiled kernels now take H and W at run time, so one plan, compiled in the constructor, serves every size (and
  a later process loads it from the plan cache).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
from onnx import TensorProto, helper, numpy_helper
from ort_models import make_model, save, value

import onyxia.ort as ort
from onyxia.cli.plan_cache import STATS

CPU = ["CPUExecutionProvider"]
RNG = np.random.default_rng(0)


def _resize(path: Path, scale: float, dims: list) -> Path:
    scales = numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "scales")
    node = helper.make_node(
        "Resize", ["x", "", "scales"], ["y"], mode="nearest", coordinate_transformation_mode="asymmetric"
    )
    node.attribute.append(helper.make_attribute("nearest_mode", "floor"))
    model = make_model([node], [value("x", TensorProto.FLOAT, dims)], [value("y", TensorProto.FLOAT, None)], [scales])
    return save(model, path)


def _conv(path: Path) -> Path:
    """A 3 x 3 conv (4 -> 8 channels, pads 1) over [n, 4, h, w]: the tiled rows kernel's shape."""
    weight = numpy_helper.from_array(RNG.standard_normal((8, 4, 3, 3)).astype(np.float32), "w")
    model = make_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])],
        [value("x", TensorProto.FLOAT, ["n", 4, "h", "w"])],
        [value("y", TensorProto.FLOAT, None)],
        [weight],
    )
    return save(model, path)


def _check(session: ort.InferenceSession, path: Path, shapes: list[tuple[int, ...]]) -> None:
    reference = onnxruntime.InferenceSession(str(path), providers=CPU)
    for shape in shapes:
        x = RNG.standard_normal(shape).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        (expected,) = reference.run(None, {"x": x})
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_integer_scale_resize_keeps_image_dims_open(tmp_path: Path) -> None:
    path = _resize(tmp_path / "fpn_up.onnx", 2.0, ["n", 2, "h", "w"])
    session = ort.InferenceSession(path)
    _check(session, path, [(1, 2, 3, 5), (2, 2, 4, 4), (1, 2, 7, 2)])
    assert session.executor.stats.replans == 0  # one plan for every shape


def test_a_waiting_plan_loads_with_an_odd_number_of_waiting_dims(tmp_path: Path) -> None:
    path = _resize(tmp_path / "up_1_5.onnx", 1.5, [1, 1, "h", 6])
    session = ort.InferenceSession(path)  # was: "'6 * h' evaluates to -6"
    _check(session, path, [(1, 1, 4, 6), (1, 1, 6, 6), (1, 1, 4, 6)])
    assert session.executor.stats.replans == 2


def test_conv_compiles_one_plan_for_every_image_size(tmp_path: Path) -> None:
    path = _conv(tmp_path / "conv.onnx")
    misses = STATS.misses
    session = ort.InferenceSession(path)
    stats = session.executor.stats
    modules = stats.shader_modules_created
    _check(session, path, [(1, 4, 6, 10), (3, 4, 5, 9), (2, 4, 17, 4)])
    assert STATS.misses <= misses + 1  # the constructor's one compile (none with the plan cache off or warm)
    assert (stats.replans, stats.plan_switches, stats.shader_modules_created) == (0, 0, modules)
    plan = session.executor.compiled
    assert "per_shape" not in plan.metadata and not {"n", "h", "w"} & plan.dims.keys()  # all three stay open
    labels = [s.label for s in plan.shaders]
    assert any(label.startswith("vision/conv_gemm") for label in labels), labels  # the tiled kernel, not direct


def test_a_later_session_loads_the_open_conv_plan_from_the_cache(tmp_path: Path) -> None:
    path = _conv(tmp_path / "conv_cached.onnx")
    _check(ort.InferenceSession(path), path, [(1, 4, 7, 11)])
    misses = STATS.misses
    later = ort.InferenceSession(path)
    _check(later, path, [(2, 4, 9, 5)])
    assert STATS.misses == misses  # the open plan was a cache hit, and a new size compiles nothing
    assert later.executor.stats.replans == 0


def _squeeze_if_single(path: Path) -> Path:
    """silero VAD's decoder: ``If(Shape(x)[0] == 1, Squeeze(x, 0), Identity(x))`` (branches of different ranks on
    a symbolic batch), then a ReduceSum whose axes are an input (a plan that waits for that value)."""
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    axis0 = numpy_helper.from_array(np.array([0], np.int64), "axis0")
    then = helper.make_graph(
        [helper.make_node("Squeeze", ["x", "axis0"], ["s"])], "then", [], [value("s", TensorProto.FLOAT, None)]
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["i"])], "else", [], [value("i", TensorProto.FLOAT, None)]
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Equal", ["batch", "one"], ["single"]),
        helper.make_node("If", ["single"], ["picked"], then_branch=then, else_branch=other),
        helper.make_node("ReduceSum", ["picked", "axes"], ["y"], keepdims=0),
    ]
    model = make_model(
        nodes,
        [value("x", TensorProto.FLOAT, ["n", 4, 3]), value("axes", TensorProto.INT64, [1])],
        [value("y", TensorProto.FLOAT, None)],
        [zero, one, axis0],
    )
    return save(model, path)


def test_a_plan_waiting_for_values_waits_for_the_input_dims_too(tmp_path: Path) -> None:
    path = _squeeze_if_single(tmp_path / "squeeze_if_single.onnx")
    session = ort.InferenceSession(path)
    reference = onnxruntime.InferenceSession(str(path), providers=CPU)
    for batch, axis in ((1, 0), (1, 1), (2, 1)):
        feeds = {"x": RNG.standard_normal((batch, 4, 3)).astype(np.float32), "axes": np.array([axis], np.int64)}
        (got,) = session.run(None, feeds)
        (expected,) = reference.run(None, feeds)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
