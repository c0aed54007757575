"""`ResizeOp`: Resize (opset 11+) of the spatial axes of an NCHW image, nearest or bilinear.

Upsampling layers in exported detectors and segmenters are Resize on H and W with constant scales or
sizes, so the output size and each axis's coordinate map are settled at compile time and become
shader literals. What has no shader here fails at compile time, naming the attribute value: cubic
mode, tf_crop_and_resize, antialiased linear downsampling, and scaling the N or C axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    SymbolicExpr,
    TensorType,
    ceil_div,
    load_wgsl,
)
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import FLOATS, require_dtype
from onyxia.operators.vision.geometry import unsupported, unsupported_attribute

__all__ = ["RESIZE", "ResizeOp"]

_SOURCE = load_wgsl(__package__, "resize.wgsl")
_RANK = 4
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = {"not_larger": min, "not_smaller": max}  # keep_aspect_ratio_policy other than stretch

_Map = tuple[float, float, float, float]  # x_in = (x_out + P) * NUM / DEN - Q


def _half_pixel_symmetric(scale: float, size_in: int, size_out: int) -> _Map:
    # the half-pixel map shifted so the resized content stays centred when sizes were rounded
    offset = size_in / 2 * (1 - size_out / (scale * size_in))
    return 0.5, 1.0, scale, 0.5 - offset


_TRANSFORMS: dict[str, Callable[[float, int, int], _Map]] = {
    "half_pixel": lambda scale, size_in, size_out: (0.5, 1.0, scale, 0.5),
    "pytorch_half_pixel": lambda scale, size_in, size_out: (0.5, 1.0, scale, 0.5) if size_out > 1 else (0, 0, 1, 0),
    "align_corners": lambda scale, size_in, size_out: (
        (0, size_in - 1, size_out - 1, 0) if size_out > 1 else (0, 0, 1, 0)
    ),
    "asymmetric": lambda scale, size_in, size_out: (0.0, 1.0, scale, 0.0),
    "half_pixel_symmetric": _half_pixel_symmetric,
}


@dataclass(frozen=True)
class _Target:
    """Output dims and the scale each axis's coordinate map divides by."""

    dims: list[SymbolicDim]
    scales: list[float]


def _check_modes(ctx: NodeCtx) -> str:
    mode = ctx.attr_str("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise unsupported_attribute(ctx, "mode", mode, "nearest or linear")
    transform = ctx.attr_str("coordinate_transformation_mode", "half_pixel")
    if transform not in _TRANSFORMS:
        raise unsupported_attribute(ctx, "coordinate_transformation_mode", transform, " or ".join(_TRANSFORMS))
    nearest = ctx.attr_str("nearest_mode", "round_prefer_floor")
    if nearest not in _NEAREST_MODES:
        raise unsupported_attribute(ctx, "nearest_mode", nearest, " or ".join(_NEAREST_MODES))
    if ctx.attr_int("antialias", 0) and mode == "linear":
        raise unsupported_attribute(ctx, "antialias", ctx.attr_int("antialias"), "0 (no antialiasing filter)")
    return mode


def _constant(ctx: NodeCtx, i: int, what: str) -> np.ndarray | None:
    """Input `i` as a compile-time array, or None when absent or empty (ONNX's 'not given')."""
    if not ctx.has_input(i):
        return None
    value = ctx.input_value(i)
    if value is None:
        raise unsupported(ctx, f"input {i} ({what}) is computed at run time; expected a compile-time constant")
    return value if value.size else None


def _target(ctx: NodeCtx, dims: Sequence[SymbolicDim]) -> _Target:
    axes = ctx.normalize_axes(ctx.attr_ints("axes", list(range(len(dims)))), len(dims))
    scales, sizes = _constant(ctx, 2, "scales"), _constant(ctx, 3, "sizes")
    if (scales is None) == (sizes is None):
        raise ctx.error("exactly one of input 2 (scales) and input 3 (sizes) must be given")
    given, what = (scales, "scales") if scales is not None else (sizes, "sizes")
    if len(given) != len(axes):  # type: ignore[arg-type]
        raise ctx.error(f"input {what} has {len(given)} entries; expected {len(axes)}")  # type: ignore[arg-type]
    if scales is not None:
        return _from_scales(ctx, dims, axes, [float(s) for s in scales.astype(np.float32)])
    return _from_sizes(ctx, dims, axes, list(sizes))  # type: ignore[arg-type]


def _from_scales(ctx: NodeCtx, dims: Sequence[SymbolicDim], axes: list[int], scales: list[float]) -> _Target:
    """``out = floor(in * scale)`` in float32, as ORT computes it."""
    out, factors = list(dims), [1.0] * len(dims)
    for axis, scale in zip(axes, scales):
        factors[axis] = scale
        out[axis] = dims[axis] if scale == 1 else math.floor(np.float32(_static(ctx, dims[axis])) * np.float32(scale))
    return _Target(out, factors)


def _from_sizes(ctx: NodeCtx, dims: Sequence[SymbolicDim], axes: list[int], sizes: list[SymbolicDim]) -> _Target:
    """The coordinate maps divide by ``out / in`` in float32; a size equal to its (maybe symbolic) dim is
    scale 1, so exporters' ``Concat(Shape(x)[:2], [h, w])`` keeps a symbolic batch."""
    ratios = [
        1.0 if size == dims[axis] else float(np.float32(int(size)) / np.float32(_static(ctx, dims[axis])))
        for axis, size in zip(axes, sizes)
    ]
    out, factors = list(dims), [1.0] * len(dims)
    policy = ctx.attr_str("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        for axis, size, ratio in zip(axes, sizes, ratios):
            out[axis], factors[axis] = size if isinstance(size, SymbolicExpr) else int(size), ratio
        return _Target(out, factors)
    if policy not in _POLICIES:
        raise unsupported_attribute(ctx, "keep_aspect_ratio_policy", policy, "stretch, not_larger or not_smaller")
    ratio = _POLICIES[policy](ratios)
    for axis in axes:
        out[axis], factors[axis] = math.floor(ratio * _static(ctx, dims[axis]) + 0.5), ratio
    return _Target(out, factors)


def _static(ctx: NodeCtx, dim: SymbolicDim) -> int:
    if not isinstance(dim, int):
        raise ctx.error(f"a resized axis has symbolic size {dim}; scales and sizes need static spatial dims")
    return dim


def _checked_target(ctx: NodeCtx) -> _Target:
    dims = ctx.input_dims(0)
    if len(dims) != _RANK:
        raise unsupported(ctx, f"input 0 has rank {len(dims)}; only rank 4 (NCHW, resizing H and W) is supported")
    _check_modes(ctx)
    target = _target(ctx, dims)
    for axis in (0, 1):
        if target.dims[axis] != dims[axis] or target.scales[axis] != 1.0:
            found = f"scale {target.scales[axis]}, size {target.dims[axis]} from {dims[axis]}"
            raise unsupported(ctx, f"scales/sizes resize axis {axis} ({found}); only H and W (axes 2, 3) are supported")
    return target


@dataclass(frozen=True)
class ResizeOp(OperatorBase):
    name: str = "Resize"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        return [TensorType(ctx.input_dtype(0), shape_of(_checked_target(ctx).dims))]

    def plan(self, ctx: PlanCtx) -> None:
        target, dims = _checked_target(ctx), ctx.input_dims(0)
        require_dtype(ctx, ctx.input_dtype(0), FLOATS)
        total = dims_product(target.dims)
        if total == 0:
            return
        defs = {**type_defs(X_T=ctx.input_dtype(0), Y_T=ctx.output_tensor(0).dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        defs["MODE"] = _check_modes(ctx)
        defs["NEAREST_MODE"] = ctx.attr_str("nearest_mode", "round_prefer_floor")
        transform = _TRANSFORMS[ctx.attr_str("coordinate_transformation_mode", "half_pixel")]
        for axis, prefix in ((2, "H"), (3, "W")):
            coefficients = transform(target.scales[axis], dims[axis], target.dims[axis])  # type: ignore[arg-type]
            for key, value in zip(("P", "NUM", "DEN", "Q"), coefficients):
                defs[f"{prefix}_{key}"] = repr(float(np.float32(value)))
        plane = {"TOTAL": total, "H": dims[2], "W": dims[3], "OH": target.dims[2], "OW": target.dims[3]}
        shader = ctx.compile_shader("vision/resize", _SOURCE, defs, plane)
        ctx.dispatch(shader, [ctx.input(0)], [ctx.output(0)], ceil_div(total, WORKGROUP_SIZE))


RESIZE: dict[tuple[str, int, int | None], ResizeOp] = {("Resize", 11, None): ResizeOp()}
