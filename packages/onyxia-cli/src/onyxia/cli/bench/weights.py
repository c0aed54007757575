"""Seeded weight values, generated per tensor and in row chunks so a 671 MB embedding never sits in memory twice.

Each tensor draws from its own generator seeded by (seed, crc32(name)), so any tensor can be regenerated
alone (the q4 file re-derives its projections without reading the fp32 file) and the values do not depend
on which precisions are written or in what order.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from onyxia.cli.bench.graph_builder import WeightSpec

__all__ = ["CHUNK_ELEMENTS", "LINEAR_STD", "NORM_STD", "iter_weight_chunks", "weight_array"]

LINEAR_STD = 0.02  # Gemma's initializer_range; embeddings too (times sqrt(hidden) in the graph)
NORM_STD = 0.1  # norm scales are stored as 1 + w, with w ~ N(0, 0.1) instead of trained values
CHUNK_ELEMENTS = 1 << 24  # 64 MiB of float32 per chunk


def iter_weight_chunks(spec: WeightSpec, seed: int, chunk_elements: int = CHUNK_ELEMENTS) -> Iterator[np.ndarray]:
    """float32 row blocks of `spec`, C-contiguous, in order; their concatenation is the tensor."""
    if spec.kind in ("cos", "sin"):
        yield _rope_cache(spec)
        return
    if spec.kind == "inv_freq":  # torch.onnx's rotary_emb.inv_freq: the graph takes cos/sin of positions * it
        (half,) = spec.shape
        yield (1.0 / spec.theta ** (np.arange(half, dtype=np.float64) * 2 / (2 * half))).astype(np.float32)
        return
    rng = np.random.default_rng([seed, zlib.crc32(spec.name.encode())])
    rows, row_size = spec.shape[0], int(np.prod(spec.shape[1:], dtype=np.int64))
    step = max(1, chunk_elements // max(row_size, 1))
    for start in range(0, rows, step):
        chunk = rng.standard_normal((min(step, rows - start), *spec.shape[1:]), dtype=np.float32)
        yield _scale(spec, chunk)


def weight_array(spec: WeightSpec, seed: int) -> np.ndarray:
    """The whole tensor; for the small weights (norms, projections) that are quantized or stored inline."""
    chunks = list(iter_weight_chunks(spec, seed))
    return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)


def _scale(spec: WeightSpec, chunk: np.ndarray) -> np.ndarray:
    if spec.kind in ("linear", "embedding"):
        chunk *= np.float32(LINEAR_STD)
    elif spec.kind == "norm":
        chunk *= np.float32(NORM_STD)
        chunk += np.float32(1.0)
    else:
        raise ValueError(f"weight {spec.name!r}: unknown kind {spec.kind!r}")
    return chunk


def _rope_cache(spec: WeightSpec) -> np.ndarray:
    """cos or sin of position * theta^(-2i/rotary_dim) / stretch, times magnitude, [positions, rotary_dim / 2];
    angles in float64 (rotary_dim is head_dim, or the rotated part of it under partial rotary)."""
    positions, half = spec.shape
    inv_freq = 1.0 / (spec.theta ** (np.arange(half, dtype=np.float64) * 2 / (2 * half))) / spec.stretch
    angles = np.outer(np.arange(positions, dtype=np.float64), inv_freq)
    values = np.cos(angles) if spec.kind == "cos" else np.sin(angles)
    return (values * spec.magnitude).astype(np.float32)
