"""Random inputs for the movement tests (one generator, so every dtype gets valid, varied values)."""

from __future__ import annotations

import numpy as np

__all__ = ["random_data"]


def random_data(shape: tuple[int, ...], dtype: type, seed: int = 0, low: int = -1000, high: int = 1000) -> np.ndarray:
    """Normal floats, uniform ints within [low, high] clipped to the dtype, fair bools; always an array."""
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(max(info.min, low), min(info.max, high), size=shape, endpoint=True), dtype)
    return np.asarray(rng.standard_normal(shape), dtype)
