"""`ResizeOp`: Resize (opset 11+) of the spatial axes of an NCW, NCHW or NCDHW tensor: nearest, linear or cubic.

Upsampling layers in exported detectors and segmenters are Resize on H and W (audio and TTS decoders:
on L of [N, C, L]) with constant scales or sizes, so the output size and each axis's coordinate map
are settled at compile time and become shader literals. Nearest and linear compute the source
coordinate in the shader; cubic, antialiased filters and tf_crop_and_resize (whose roi must be a
constant too) read per-axis tap tables built at compile time (`resize_taps`), which needs static
spatial sizes. One kernel serves ranks 3 to 5: rank 3 runs as NCHW with H = 1 (mapped to itself),
rank 5 adds the depth axis (`DEPTH`). Scaling the N or C axis fails at compile time, naming the values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
)
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal, type_defs
from onyxia.operators.typesets import FLOATS, require_dtype
from onyxia.operators.vision.geometry import unsupported, unsupported_attribute
from onyxia.operators.vision.resize_nearest import nearest_axis
from onyxia.operators.vision.resize_taps import Filter, axis_taps
from onyxia.operators.vision.resize_target import ResizeTarget, constant_input, resize_target, static_size

__all__ = ["RESIZE", "ResizeOp"]

_SOURCE = load_wgsl(__package__, "resize.wgsl")
_RANKS = (3, 4, 5)
_MODES = ("nearest", "linear", "cubic")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_CROP = "tf_crop_and_resize"

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
_SIZE_FREE = ("half_pixel", "asymmetric")  # maps that never read the sizes: they accept a symbolic H or W


def _check_modes(ctx: NodeCtx) -> str:
    """The shader's MODE: the affine nearest / linear paths, or `taps` for what needs tap tables."""
    mode = ctx.attr_str("mode", "nearest")
    if mode not in _MODES:
        raise unsupported_attribute(ctx, "mode", mode, " or ".join(_MODES))
    transform = ctx.attr_str("coordinate_transformation_mode", "half_pixel")
    if transform not in _TRANSFORMS and transform != _CROP:
        raise unsupported_attribute(
            ctx, "coordinate_transformation_mode", transform, " or ".join([*_TRANSFORMS, _CROP])
        )
    nearest = ctx.attr_str("nearest_mode", "round_prefer_floor")
    if nearest not in _NEAREST_MODES:
        raise unsupported_attribute(ctx, "nearest_mode", nearest, " or ".join(_NEAREST_MODES))
    # antialias filters only linear and cubic (the spec); onnxruntime ignores it for nearest
    if mode == "cubic" or transform == _CROP or (ctx.attr_int("antialias", 0) and mode != "nearest"):
        return "taps"
    return mode


def _kernel_axes(rank: int) -> dict[str, int | None]:
    """The shader's spatial axes (D only at rank 5) -> the input axis each is, None for rank 3's H
    (a size-1 axis every coordinate map sends to 0)."""
    return _KERNEL_AXES[rank]


_KERNEL_AXES: dict[int, dict[str, int | None]] = {
    3: {"H": None, "W": 2},
    4: {"H": 2, "W": 3},
    5: {"D": 2, "H": 3, "W": 4},
}


def _axis(
    target: ResizeTarget, dims: Sequence[SymbolicDim], axis: int | None
) -> tuple[SymbolicDim, SymbolicDim, float]:
    """(input size, output size, scale) of a shader axis."""
    return (1, 1, 1.0) if axis is None else (dims[axis], target.dims[axis], target.scales[axis])


def _checked_target(ctx: NodeCtx) -> ResizeTarget:
    dims = ctx.input_dims(0)
    if len(dims) not in _RANKS:
        raise unsupported(
            ctx,
            f"input 0 has rank {len(dims)}; ranks 3 to 5 (NCW, NCHW, NCDHW: resizing the axes after C) are supported",
        )
    _check_modes(ctx)
    target = resize_target(ctx, dims)
    for axis in (0, 1):
        if target.dims[axis] != dims[axis] or target.scales[axis] != 1.0:
            found = f"scale {target.scales[axis]}, size {target.dims[axis]} from {dims[axis]}"
            spatial = ", ".join(str(a) for a in range(2, len(dims)))
            raise unsupported(ctx, f"scales/sizes resize axis {axis} ({found}); only the spatial axes ({spatial}) are")
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
        plane: dict[str, SymbolicDim] = {"TOTAL": total}
        for name, axis in _kernel_axes(len(dims)).items():
            plane[name], plane[f"O{name}"], _ = _axis(target, dims, axis)
        if len(dims) == 5:
            defs["DEPTH"] = True
        reads = [ctx.input(0)]
        if defs["MODE"] == "taps":
            plane.update(_bind_taps(ctx, target, dims, reads))
            value = ctx.attr_float("extrapolation_value", 0.0)
            defs["EXTRAPOLATION_VALUE"] = node_literal(ctx, DataType.FLOAT, value, "attribute 'extrapolation_value'")
        elif defs["MODE"] == "nearest":
            defs.update(_nearest_defs(ctx, target, dims, reads))
        else:
            defs.update(_affine_defs(ctx, target, dims))
        shader = ctx.compile_shader("vision/resize", _SOURCE, defs, plane)
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(total, WORKGROUP_SIZE))


def _nearest_defs(ctx: PlanCtx, target: ResizeTarget, dims: Sequence[SymbolicDim], reads: list) -> dict[str, object]:
    """Each axis's index table (its start in one buffer, appended to `reads`) or exact integer map
    (`resize_nearest`): where ties fall is settled on the host, not by the adapter's float arithmetic."""
    name = ctx.attr_str("coordinate_transformation_mode", "half_pixel")
    nearest_mode = ctx.attr_str("nearest_mode", "round_prefer_floor")
    defs: dict[str, object] = {}
    tables: list[np.ndarray] = []
    for prefix, axis in _kernel_axes(len(dims)).items():
        size_in, size_out, scale = _axis(target, dims, axis)
        found = nearest_axis(name, nearest_mode, scale, size_in, size_out)
        if found is None:
            raise unsupported(ctx, f"axis {axis} has symbolic size {size_in} -> {size_out}; {name} needs it static")
        if found.table is not None:
            defs[f"{prefix}_TABLE"] = sum(len(t) for t in tables)
            tables.append(found.table)
        else:
            a, b, c, up = found.rational or (1, 0, 1, False)
            defs[f"{prefix}_MAP"] = f"{a}, {b}, {c}, {'true' if up else 'false'}"
    if tables:
        data = np.concatenate(tables)
        reads.append(ctx.constant(f"resize_nearest:{hashlib.sha1(data.tobytes()).hexdigest()[:16]}", data))
        defs["INDEX_TABLE"] = True
    return defs


def _affine_defs(ctx: PlanCtx, target: ResizeTarget, dims: Sequence[SymbolicDim]) -> dict[str, object]:
    """The per-axis ``(x + P) * NUM / DEN - Q`` literals of the linear path."""
    name = ctx.attr_str("coordinate_transformation_mode", "half_pixel")
    transform = _TRANSFORMS[name]
    defs: dict[str, object] = {}
    for prefix, axis in _kernel_axes(len(dims)).items():
        size_in, size_out, scale = _axis(target, dims, axis)
        if not isinstance(size_in, int) or not isinstance(size_out, int):
            if name not in _SIZE_FREE:
                raise unsupported(ctx, f"axis {axis} has symbolic size {size_in} -> {size_out}; {name} needs it static")
            size_in = size_out = 0  # an unresized symbolic axis (target sizes equal to it): the map ignores sizes
        coefficients = transform(scale, size_in, size_out)
        for key, value in zip(("P", "NUM", "DEN", "Q"), coefficients):
            defs[f"{prefix}_{key}"] = node_literal(ctx, DataType.FLOAT, value, f"axis {axis} coordinate {key}")
    return defs


def _bind_taps(ctx: PlanCtx, target: ResizeTarget, dims: Sequence[SymbolicDim], reads: list) -> dict[str, int]:
    """Build the H and W tap tables, append their buffers to `reads`, return the tap counts."""
    f = Filter(
        ctx.attr_str("mode", "nearest"),
        ctx.attr_str("nearest_mode", "round_prefer_floor"),
        ctx.attr_float("cubic_coeff_a", -0.75),
        bool(ctx.attr_int("antialias", 0)),
        bool(ctx.attr_int("exclude_outside", 0)),
    )
    crop = _crop_roi(ctx, len(dims)) if ctx.attr_str("coordinate_transformation_mode", "half_pixel") == _CROP else None
    tables = {}
    for name, axis in _kernel_axes(len(dims)).items():
        size_in, size_out, scale = _axis(target, dims, axis)
        size, out = static_size(ctx, size_in), static_size(ctx, size_out)
        x = np.arange(out, dtype=np.float32)
        if crop is None:
            transform = _TRANSFORMS[ctx.attr_str("coordinate_transformation_mode", "half_pixel")]
            p, num, den, q = (np.float32(v) for v in transform(scale, size, out))
            coords, outside = (x + p) * num / den - q, None
        else:
            coords = _crop_coords(x, size, out, *(crop[axis] if axis is not None else (0.0, 1.0)))
            outside = (coords < 0) | (coords > size - 1)
        tables[name] = axis_taps(coords, size, scale, f, outside)
    order = [tables[name] for name in ("H", "W", "D") if name in tables]  # resize.wgsl's table layout
    for name, column in (("index", "index"), ("weight", "weight")):
        data = np.concatenate([getattr(t, column).reshape(-1) for t in order])
        reads.append(ctx.constant(f"resize_taps:{name}:{hashlib.sha1(data.tobytes()).hexdigest()[:16]}", data))
    return {f"T{name}": t.index.shape[1] for name, t in tables.items()}


def _crop_roi(ctx: NodeCtx, rank: int) -> dict[int, tuple[float, float]]:
    """tf_crop_and_resize's per-axis (start, end), from input 1 laid out as [starts..., ends...]."""
    axes = ctx.normalize_axes(ctx.attr_ints("axes", list(range(rank))), rank)
    roi = constant_input(ctx, 1, "roi")
    if roi is None or roi.size != 2 * len(axes):
        found = "no roi" if roi is None else f"{roi.size} entries"
        raise ctx.error(f"tf_crop_and_resize needs input 1 (roi) with {2 * len(axes)} entries; found {found}")
    values = [float(v) for v in roi.astype(np.float32).reshape(-1)]
    crop = dict.fromkeys(range(rank), (0.0, 1.0))
    crop.update({axis: (values[i], values[i + len(axes)]) for i, axis in enumerate(axes)})
    return crop


def _crop_coords(x: np.ndarray, size: int, out: int, start: float, end: float) -> np.ndarray:
    """The roi window's source coordinates, in float32 and in onnxruntime's order."""
    start32, end32, last = np.float32(start), np.float32(end), np.float32(size - 1)
    if out == 1:
        return np.full(1, np.float32(0.5) * (start32 + end32) * last, np.float32)
    return start32 * last + x * (end32 - start32) * last / np.float32(out - 1)


RESIZE: dict[tuple[str, int, int | None], ResizeOp] = {("Resize", 11, None): ResizeOp()}
