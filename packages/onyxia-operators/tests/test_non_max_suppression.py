"""NonMaxSuppression against onnxruntime: both box formats, batches and classes, each optional input
absent, constant or fed at run time, ties in scores and boxes, empty results; the selected count is
read back once per run and one compiled plan serves every count."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from oracle import assert_close, check_op, check_rebinding, compile_model, make_model, reference_outputs, runtime

from onyxia.core.errors import ShapeInferenceError
from onyxia.core.plan import ReadValues

RNG = np.random.default_rng(17)
PARAMS = ("max_out", "iou", "score")


def _boxes(batches: int, n: int, center: int, spread: float = 10.0) -> np.ndarray:
    xy = RNG.random((batches, n, 2)) * spread
    wh = RNG.random((batches, n, 2)) * 4 + 0.5
    if center:
        return np.concatenate([xy, wh], -1).astype(np.float32)
    corners = np.concatenate([xy, xy + wh], -1)
    flip = RNG.random((batches, n, 1)) < 0.5  # either diagonal pair of corners, as ONNX allows
    return np.where(flip, corners[..., [2, 3, 0, 1]], corners).astype(np.float32)


def _inputs(
    boxes: np.ndarray, scores: np.ndarray, max_out: int | None, iou: float | None, score: float | None
) -> dict[str, np.ndarray | None]:
    return {
        "boxes": boxes,
        "scores": scores,
        "max_out": None if max_out is None else np.array([max_out], np.int64),
        "iou": None if iou is None else np.array([iou], np.float32),
        "score": None if score is None else np.array([score], np.float32),
    }


def _check(inputs: Mapping[str, np.ndarray | None], center: int, constant: bool) -> np.ndarray:
    initializers = [p for p in PARAMS if constant and inputs[p] is not None]
    return check_op("NonMaxSuppression", inputs, {"center_point_box": center}, opset=11, initializers=initializers)[0]


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("constant", [True, False], ids=["constant_params", "run_time_params"])
@pytest.mark.parametrize(
    ("max_out", "iou", "score"),
    [(5, 0.4, 0.3), (100, 0.5, None), (3, None, 0.5), (100, None, None), (2**31 - 1, 0.6, 0.1)],
)
def test_nms_matches_onnxruntime(
    center: int, constant: bool, max_out: int, iou: float | None, score: float | None
) -> None:
    inputs = _inputs(_boxes(2, 60, center), RNG.random((2, 3, 60)).astype(np.float32), max_out, iou, score)
    selected = _check(inputs, center, constant)
    assert selected.shape[0] > 0, "the case should select something"


@pytest.mark.parametrize("constant", [True, False], ids=["constant_params", "run_time_params"])
def test_nms_without_max_output_selects_nothing(constant: bool) -> None:
    inputs = _inputs(_boxes(1, 10, 0), RNG.random((1, 2, 10)).astype(np.float32), None, 0.5, None)
    assert _check(inputs, 0, constant).shape == (0, 3)
    inputs = _inputs(_boxes(1, 10, 0), RNG.random((1, 2, 10)).astype(np.float32), 0, 0.5, None)
    assert _check(inputs, 0, constant).shape == (0, 3)


def test_nms_score_threshold_above_every_score_selects_nothing() -> None:
    inputs = _inputs(_boxes(1, 30, 1), RNG.random((1, 2, 30)).astype(np.float32), 10, 0.5, 1.5)
    assert _check(inputs, 1, False).shape == (0, 3)


@pytest.mark.parametrize("center", [0, 1])
def test_nms_ties_in_scores_and_boxes_go_to_the_lower_index(center: int) -> None:
    """Scores from {0.25, 0.5, 0.75} and every box repeated three times (identical boxes suppress each
    other at any threshold below 1): the order among equal scores decides every selection."""
    boxes = np.repeat(_boxes(1, 12, center, spread=6.0), 3, axis=1)
    scores = RNG.integers(1, 4, (1, 2, 36)).astype(np.float32) / 4
    _check(_inputs(boxes, scores, 50, 0.2, None), center, False)
    _check(_inputs(boxes, scores, 50, 0.0, 0.3), center, True)


def test_nms_of_constant_inputs_folds() -> None:
    inputs = _inputs(_boxes(2, 20, 0), RNG.random((2, 2, 20)).astype(np.float32), 6, 0.3, 0.2)
    check_op("NonMaxSuppression", inputs, opset=11, initializers=["boxes", "scores", *PARAMS])


def test_nms_many_boxes_one_class() -> None:
    """torchvision's batched NMS shape: one batch, one class, hundreds of boxes, most kept."""
    inputs = _inputs(_boxes(1, 900, 0, spread=300.0), RNG.random((1, 1, 900)).astype(np.float32), 2**40, 0.55, None)
    assert _check(inputs, 0, True).shape[0] > 300


def test_nms_iou_threshold_outside_0_1_is_a_compile_error() -> None:
    inputs = _inputs(_boxes(1, 5, 0), RNG.random((1, 1, 5)).astype(np.float32), 3, 1.5, None)
    model = make_model("NonMaxSuppression", inputs, opset=11, initializers=list(PARAMS[:2]))
    with pytest.raises(ShapeInferenceError, match=r"iou_threshold\) is 1.5; expected a value in \[0, 1\]"):
        compile_model(model)


def test_nms_count_is_read_back_once_per_run_and_one_plan_serves_every_count() -> None:
    inputs = _inputs(_boxes(1, 80, 0), RNG.random((1, 2, 80)).astype(np.float32), 40, 0.5, 0.5)
    model = make_model("NonMaxSuppression", inputs, opset=11)
    compiled = compile_model(model)
    assert sum(isinstance(s, ReadValues) for op in compiled.operations for s in op.steps) == 1
    executor = runtime().load_model(compiled)
    pipelines = None
    for run, (max_out, iou, score) in enumerate([(40, 0.5, 0.5), (3, 0.2, 0.0), (40, 0.9, 0.99), (0, 0.5, 0.5)], 1):
        feeds = _inputs(_boxes(1, 80, 0), RNG.random((1, 2, 80)).astype(np.float32), max_out, iou, score)
        arrays = {k: v for k, v in feeds.items() if v is not None}
        got = executor.run(arrays)["y0"]
        assert_close(got, reference_outputs(model, arrays, "ort")[0], f"run {run}")
        assert executor.stats.value_readbacks == run, "one read-back of the count per run"
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines, f"run {run} built a pipeline"


def test_nms_one_plan_serves_every_batch_class_and_box_count() -> None:
    """Symbolic batches, classes and boxes (none at all included): rebound per run, never recompiled."""
    inputs = _inputs(_boxes(1, 10, 0), RNG.random((1, 2, 10)).astype(np.float32), 5, 0.3, None)
    model = make_model(
        "NonMaxSuppression", inputs, opset=11, dim_params={"boxes": ["b", "n", 4], "scores": ["b", "c", "n"]}
    )
    sizes = [(1, 2, 10), (2, 3, 40), (1, 1, 1), (2, 2, 0), (1, 2, 7)]
    feeds = [_inputs(_boxes(b, n, 0), RNG.random((b, c, n)).astype(np.float32), 5, 0.3, None) for b, c, n in sizes]
    check_rebinding(model, [{k: v for k, v in f.items() if v is not None} for f in feeds])
