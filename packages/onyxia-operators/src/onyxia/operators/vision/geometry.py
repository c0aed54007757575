"""Sliding-window arithmetic shared by Conv, ConvTranspose and the pools.

Every windowed op reads the same attributes (`kernel_shape`, `strides`, `dilations`, `pads`,
`auto_pad`, `ceil_mode`) with the same defaults, and every shader here works on a 3-D volume, so
this module turns them into one `Window` of per-axis numbers and pads a 1-D or 2-D op with leading
size-1 axes (a 2-D op is a depth-1 volume; the shader compiler drops the unit loops).
Spatial dims may be symbolic where the arithmetic stays exact (explicit pads); SAME padding and the
ceil-mode "drop the window that starts in the right padding" rule compare sizes, so those need them
static.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onyxia.core import NodeCtx, SymbolicDim, UnsupportedOpError

__all__ = ["AUTO_PADS", "Window", "forward_window", "transpose_window", "unsupported", "unsupported_attribute"]

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
_MAX_SPATIAL = 3
_AXES = ("D", "H", "W")  # shader dim suffixes, outermost first


def unsupported(ctx: NodeCtx, message: str) -> UnsupportedOpError:
    """A compile-time refusal naming the node and the op: no shader here implements what it asks."""
    node = ctx.node
    return UnsupportedOpError(f"node '{node.name}' ({node.op_type}, domain {node.domain or 'ai.onnx'}): {message}")


def unsupported_attribute(ctx: NodeCtx, attribute: str, value: object, expected: str) -> UnsupportedOpError:
    return unsupported(ctx, f"attribute {attribute}={value} is not supported; expected {expected}")


@dataclass(frozen=True)
class Window:
    """Per spatial axis (outermost first): input and output extents and the window's geometry."""

    spatial: tuple[SymbolicDim, ...]
    out: tuple[SymbolicDim, ...]
    kernel: tuple[SymbolicDim, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]

    def volume(self) -> dict[str, SymbolicDim]:
        """Shader dims of the 3-D volume, per axis D, H, W: extent (``H``), output (``OH``), kernel
        (``KH``), stride (``SH``), dilation (``DH``) and pads (``PH``, ``PHE``); missing leading axes
        are size 1 with no padding."""
        lead = _MAX_SPATIAL - len(self.spatial)
        fields = {
            "{}": (1, self.spatial),
            "O{}": (1, self.out),
            "K{}": (1, self.kernel),
            "S{}": (1, self.strides),
            "D{}": (1, self.dilations),
            "P{}": (0, self.pads_begin),
            "P{}E": (0, self.pads_end),
        }
        dims: dict[str, SymbolicDim] = {}
        for name, (fill, values) in fields.items():
            for axis, value in zip(_AXES, [fill] * lead + list(values)):
                dims[name.format(axis)] = value
        return dims


def _spatial_attrs(ctx: NodeCtx, rank: int) -> tuple[list[int], list[int], list[int]]:
    """`strides`, `dilations` and `pads` with the spec's defaults, length-checked against the kernel."""
    if not 1 <= rank <= _MAX_SPATIAL:
        raise unsupported_attribute(ctx, "kernel_shape", f"(rank {rank})", "1, 2 or 3 spatial axes")
    strides = ctx.attr_ints("strides", [1] * rank)
    dilations = ctx.attr_ints("dilations", [1] * rank)
    pads = ctx.attr_ints("pads", [0] * 2 * rank)
    for name, values, size in (("strides", strides, rank), ("dilations", dilations, rank), ("pads", pads, 2 * rank)):
        if len(values) != size:
            raise ctx.error(f"attribute '{name}' has {len(values)} entries; expected {size} for {rank} spatial axes")
    if min(strides + dilations) < 1 or min(pads) < 0:
        raise ctx.error(f"strides {strides} and dilations {dilations} must be >= 1, pads {pads} >= 0")
    return strides, dilations, pads


def _auto_pad(ctx: NodeCtx) -> str:
    mode = ctx.attr_str("auto_pad", "NOTSET")
    if mode not in AUTO_PADS:
        raise unsupported_attribute(ctx, "auto_pad", mode, " or ".join(AUTO_PADS))
    return mode


def _static(ctx: NodeCtx, dim: SymbolicDim, why: str) -> int:
    if not isinstance(dim, int):
        raise ctx.error(f"spatial dim {dim} must be static for {why}")
    return dim


def _split_same(total: int, upper: bool) -> tuple[int, int]:
    """SAME_UPPER puts the odd pad at the end, SAME_LOWER at the beginning."""
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def forward_window(
    ctx: NodeCtx, spatial: Sequence[SymbolicDim], kernel: Sequence[SymbolicDim], ceil_mode: bool = False
) -> Window:
    """Conv and pool geometry: ``out = floor_or_ceil((in + pads - dilated kernel) / stride) + 1``."""
    strides, dilations, pads = _spatial_attrs(ctx, len(kernel))
    mode, rank = _auto_pad(ctx), len(kernel)
    begin, end, out = list(pads[:rank]), list(pads[rank:]), list[SymbolicDim]()
    for i, (size, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations)):
        span = (k - 1) * d + 1
        if mode.startswith("SAME"):
            n = _static(ctx, size, f"auto_pad={mode}")
            out.append(o := -(-n // s))
            total = max(0, (o - 1) * s + _static(ctx, span, "auto_pad") - n)
            begin[i], end[i] = _split_same(total, mode == "SAME_UPPER")
            continue
        if mode == "VALID":
            begin[i] = end[i] = 0
        extent = size + begin[i] + end[i] - span
        out.append(_ceil_out(ctx, extent, s, size + begin[i], end[i] - span) if ceil_mode else extent // s + 1)
    return Window(tuple(spatial), tuple(out), tuple(kernel), tuple(strides), tuple(dilations), tuple(begin), tuple(end))


def _ceil_out(
    ctx: NodeCtx, extent: SymbolicDim, stride: int, last_start: SymbolicDim, slack: SymbolicDim
) -> SymbolicDim:
    """ceil_mode: round up, but drop a window that would start inside the end padding (spec, ORT)."""
    out = (extent + stride - 1) // stride + 1
    if isinstance(slack, int) and stride + slack <= 0:
        return out  # the last window always starts inside the input plus begin padding
    out = _static(ctx, out, "ceil_mode=1 with end padding")
    return out - 1 if (out - 1) * stride >= _static(ctx, last_start, "ceil_mode=1") else out


def transpose_window(ctx: NodeCtx, spatial: Sequence[SymbolicDim], kernel: Sequence[int]) -> Window:
    """ConvTranspose geometry: ``out = stride * (in - 1) + output_padding + dilated kernel - pads``.

    With `output_shape` (or SAME auto_pad, which asks for ``in * stride``) the pads are derived from
    the requested size; the odd unit goes at the beginning except for SAME_UPPER, as ORT does.
    """
    strides, dilations, pads = _spatial_attrs(ctx, len(kernel))
    mode, rank = _auto_pad(ctx), len(kernel)
    output_padding = ctx.attr_ints("output_padding", [0] * rank)
    target = ctx.attr_ints("output_shape", [])[-rank:] if ctx.attr("output_shape") is not None else None
    begin, end, out = list(pads[:rank]), list(pads[rank:]), list[SymbolicDim]()
    for i, (size, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations)):
        full = s * (size - 1) + output_padding[i] + (k - 1) * d + 1
        if target is not None or mode.startswith("SAME"):
            wanted = target[i] if target is not None else _static(ctx, size, f"auto_pad={mode}") * s
            # as ORT: pad only what the full output exceeds the request by; a bigger request is
            # filled with zeros (plus bias) at the end
            total = max(0, _static(ctx, full, "output_shape") - wanted)
            begin[i], end[i] = _split_same(total, mode == "SAME_UPPER")
            out.append(wanted)
            continue
        if mode == "VALID":
            begin[i] = end[i] = 0
        out.append(full - begin[i] - end[i])
    return Window(tuple(spatial), tuple(out), tuple(kernel), tuple(strides), tuple(dilations), tuple(begin), tuple(end))
