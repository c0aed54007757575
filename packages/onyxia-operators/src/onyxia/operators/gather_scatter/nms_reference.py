"""onnxruntime's NonMaxSuppression on the host, for folding constant inputs (`non_max_suppression`).

The loop is the CPU kernel's: per batch and class, candidates above the score threshold in order of
score (ties: the lower index first), each kept unless a kept box's IoU with it exceeds the
threshold, until `max_out` are kept. Boxes are float32 and the IoU is computed in float32 in the
kernel's order of operations, so a fold matches what the GPU kernel computes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["non_max_suppression"]

_F = np.float32


def non_max_suppression(
    boxes: np.ndarray,
    scores: np.ndarray,
    max_out: int | None,
    iou: float | None,
    score_threshold: float | None,
    center: bool,
) -> np.ndarray:
    """``[selected, 3]`` int64 rows ``[batch, class, box]``."""
    limit = 0 if max_out is None else max(max_out, 0)
    threshold = _F(0.0 if iou is None else iou)
    rows: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        corners, areas = _corners(boxes[b].astype(_F), center)
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(_F)
            candidates = [i for i in range(s.size) if score_threshold is None or s[i] > _F(score_threshold)]
            candidates.sort(key=lambda i: (-float(s[i]), i))
            kept: list[int] = []
            for i in candidates:
                if len(kept) >= limit:
                    break
                if not any(_suppresses(corners, areas, i, k, threshold) for k in kept):
                    kept.append(i)
            rows += [(b, c, i) for i in kept]
    return np.array(rows, np.int64).reshape(-1, 3)


def _corners(boxes: np.ndarray, center: bool) -> tuple[np.ndarray, np.ndarray]:
    """(y_min, x_min, y_max, x_max) per box and its area, as onnxruntime derives them."""
    if center:
        x, y, w, h = boxes.T
        half_w, half_h = w / _F(2), h / _F(2)
        return np.stack([y - half_h, x - half_w, y + half_h, x + half_w], 1), w * h
    lo = np.minimum(boxes[:, :2], boxes[:, 2:])
    hi = np.maximum(boxes[:, :2], boxes[:, 2:])
    return np.concatenate([lo, hi], 1), (hi[:, 0] - lo[:, 0]) * (hi[:, 1] - lo[:, 1])


def _suppresses(corners: np.ndarray, areas: np.ndarray, i: int, k: int, threshold: np.float32) -> bool:
    a, b = corners[i], corners[k]
    x_min, x_max = max(a[1], b[1]), min(a[3], b[3])
    if x_max <= x_min:
        return False
    y_min, y_max = max(a[0], b[0]), min(a[2], b[2])
    if y_max <= y_min:
        return False
    intersection = (x_max - x_min) * (y_max - y_min)
    if intersection <= 0:
        return False
    union = areas[i] + areas[k] - intersection
    return bool(intersection / union > threshold)
