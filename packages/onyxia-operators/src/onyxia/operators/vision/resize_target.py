"""Resize's output dims and per-axis scales, from its constant `scales` or `sizes` input.

ONNX lets an exporter give either input (and `axes`, `keep_aspect_ratio_policy`); onnxruntime computes
``floor(in * scale)`` in float32 from scales and ``out / in`` in float32 from sizes. Settling both here,
apart from the kernel's planning, keeps `resize.py` about the shader.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import NodeCtx, SymbolicDim, SymbolicExpr
from onyxia.operators.vision.geometry import unsupported, unsupported_attribute

__all__ = ["ResizeTarget", "constant_input", "resize_target", "static_size"]

_POLICIES = {"not_larger": min, "not_smaller": max}  # keep_aspect_ratio_policy other than stretch


@dataclass(frozen=True)
class ResizeTarget:
    """Output dims and the scale each axis's coordinate map divides by."""

    dims: list[SymbolicDim]
    scales: list[float]


def constant_input(ctx: NodeCtx, i: int, what: str) -> np.ndarray | None:
    """Input `i` as a compile-time array, or None when absent or empty (ONNX's 'not given')."""
    if not ctx.has_input(i):
        return None
    value = ctx.input_value(i)
    if value is None:
        raise unsupported(ctx, f"input {i} ({what}) is computed at run time; expected a compile-time constant")
    return value if value.size else None


def resize_target(ctx: NodeCtx, dims: Sequence[SymbolicDim]) -> ResizeTarget:
    axes = ctx.normalize_axes(ctx.attr_ints("axes", list(range(len(dims)))), len(dims))
    scales, sizes = constant_input(ctx, 2, "scales"), constant_input(ctx, 3, "sizes")
    given = scales if scales is not None else sizes
    if given is None or (scales is not None and sizes is not None):
        raise ctx.error("exactly one of input 2 (scales) and input 3 (sizes) must be given")
    what = "scales" if scales is not None else "sizes"
    if len(given) != len(axes):
        raise ctx.error(f"input {what} has {len(given)} entries; expected {len(axes)}")
    if scales is not None:
        return _from_scales(ctx, dims, axes, [float(s) for s in scales.astype(np.float32)])
    return _from_sizes(ctx, dims, axes, [s if isinstance(s, SymbolicExpr) else int(s) for s in given])


def _from_scales(ctx: NodeCtx, dims: Sequence[SymbolicDim], axes: list[int], scales: list[float]) -> ResizeTarget:
    """``out = floor(in * scale)`` in float32, as ORT computes it; a symbolic axis stays symbolic under
    the scales whose float32 product is exact (`_symbolic_scaled`)."""
    out, factors = list(dims), [1.0] * len(dims)
    for axis, scale in zip(axes, scales):
        factors[axis] = scale
        dim = dims[axis]
        if scale == 1:
            continue
        if isinstance(dim, int):
            out[axis] = math.floor(np.float32(dim) * np.float32(scale))
        else:
            out[axis] = _symbolic_scaled(ctx, dim, scale)
    return ResizeTarget(out, factors)


def _symbolic_scaled(ctx: NodeCtx, dim: SymbolicDim, scale: float) -> SymbolicDim:
    """``floor(dim * scale)`` for a symbolic `dim`, where it is exact for every value: an integer scale
    (``dim * k``: exact in float32 below 2**24, as onnxruntime's own float product is) or one over a power
    of two (``dim // 2**k``: scaling by a power of two is exact). The upsampling and pooling-like
    Resizes of detectors' feature pyramids are these; any other scale needs the axis static."""
    if scale > 1 and scale.is_integer():
        return dim * int(scale)
    inverse = 1 / scale if scale > 0 else 0.0
    if 0 < scale < 1 and inverse.is_integer() and int(inverse) & (int(inverse) - 1) == 0:
        return dim // int(inverse)
    raise ctx.error(
        f"a resized axis has symbolic size {dim} and scale {scale}; a symbolic axis needs an integer scale or "
        "one over a power of two (other scales and sizes need static spatial dims)"
    )


def _from_sizes(ctx: NodeCtx, dims: Sequence[SymbolicDim], axes: list[int], sizes: list[SymbolicDim]) -> ResizeTarget:
    """The coordinate maps divide by ``out / in`` in float32; a size equal to its (maybe symbolic) dim is
    scale 1, so exporters' ``Concat(Shape(x)[:2], [h, w])`` keeps a symbolic batch."""
    ratios = [
        1.0
        if size == dims[axis]
        else float(np.float32(static_size(ctx, size)) / np.float32(static_size(ctx, dims[axis])))
        for axis, size in zip(axes, sizes)
    ]
    out, factors = list(dims), [1.0] * len(dims)
    policy = ctx.attr_str("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        for axis, size, ratio in zip(axes, sizes, ratios):
            out[axis], factors[axis] = size, ratio
        return ResizeTarget(out, factors)
    if policy not in _POLICIES:
        raise unsupported_attribute(ctx, "keep_aspect_ratio_policy", policy, "stretch, not_larger or not_smaller")
    ratio = _POLICIES[policy](ratios)
    for axis in axes:
        out[axis], factors[axis] = math.floor(ratio * static_size(ctx, dims[axis]) + 0.5), ratio
    return ResizeTarget(out, factors)


def static_size(ctx: NodeCtx, dim: SymbolicDim) -> int:
    if not isinstance(dim, int):
        raise ctx.error(f"a resized axis has symbolic size {dim}; scales and sizes need static spatial dims")
    return dim
