"""Planning the tiled convolutions: the implicit GEMM kernels (``conv_gemm.wgsl``) and the depthwise one.

`conv_shape` reads what the variant table (`conv_variants`) decides on; `plan_tiled` packs the weights,
writes the defs and dispatches the chosen kernel. The GEMM kernels read W pre-packed at load (`packed_weights`):
`[G][CG * KD * KH * KW][MGQ * 4]` with the channels past MG zero (MGQ: the group's channels over 4, rounded up to
whole lanes), so each lane reads its 4 * VPL output channels of a tap as VPL adjacent vec4s (a pixel-lane row's
lanes each all MGQ of them: VPL = MGQ). The packing is lazy (it runs when the runtime uploads the constant), and
the graph's W is not uploaded unless another node binds it.

The caller's `ConvEpilogue` says where W is and binds what follows x and W: the float `Epilogue` (Conv,
FusedConv) or the integer ops' (quantized/conv_integer.py: ConvInteger, QLinearConv), which run the same kernels
with INTEGER: exact i32 sums, each operand's zero point subtracted in the kernel as it is loaded (one integer op
per loaded value on lavapipe, where the loads cost ~100x; sum-of-row and sum-of-column correction terms would need
a per-pixel window sum of x, padding-aware, computed as often as the sums they correct). Their packed W keeps the
bytes, four channels to a u32 word, so a lane loads a channel quad's weights in one load instead of four.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from onyxia.core import BufferRef, DataType, PlanCtx, SymbolicDim, TensorValue, ceil_div, load_wgsl
from onyxia.core.shapes import static_dims
from onyxia.operators.layout import type_defs
from onyxia.operators.vision.conv_variants import ConvShape, ConvVariant
from onyxia.operators.vision.geometry import Window

__all__ = ["ConvEpilogue", "Epilogue", "bind_epilogue", "conv_shape", "plan_tiled"]

_SOURCES = {
    "rows": load_wgsl(__package__, "conv_gemm.wgsl"),
    "pointwise": load_wgsl(__package__, "conv_gemm.wgsl"),
    "depthwise": load_wgsl(__package__, "conv_depthwise.wgsl"),
}
_LABELS = {"rows": "vision/conv_gemm", "pointwise": "vision/conv_gemm", "depthwise": "vision/conv_depthwise"}


class ConvEpilogue(Protocol):
    """What the op planning a tiled conv supplies besides x (input 0)."""

    @property
    def weight(self) -> int:
        """The input holding W ([M, C / group, k...], static dims)."""
        ...

    @property
    def weight_zero_point(self) -> int | None:
        """None for a float conv; for an integer one (INTEGER) the input of w's zero point (may be absent)."""
        ...

    def bind(self, ctx: PlanCtx, reads: list[BufferRef], defs: dict[str, object]) -> None:
        """Append the epilogue's reads after x and W and set its defs, the storage types and BIND_Y among them."""
        ...


@dataclass(frozen=True)
class Epilogue:
    """What the kernel does after the sum: an activation (conv_epilogue.wgsl's ACTIVATION, with its
    constants as f32 literals) and whether a residual input (same shape as the output) is added after it."""

    activation: str = "none"
    constants: tuple[tuple[str, float], ...] = ()  # ("ALPHA", 0.1), ("LO", 0.0), ("HI", 6.0)
    residual: int | None = None  # the node input holding the residual

    weight = 1
    weight_zero_point = None

    def defs(self) -> dict[str, object]:
        return {"ACTIVATION": self.activation, **{k: f"{float(v)!r}" for k, v in self.constants}}

    def bind(self, ctx: PlanCtx, reads: list[BufferRef], defs: dict[str, object]) -> None:
        bind_epilogue(ctx, self, reads, defs)


def bind_epilogue(ctx: PlanCtx, epilogue: Epilogue, reads: list[BufferRef], defs: dict[str, object]) -> None:
    """Append the bias (input 2) and residual reads after X and W, with conv_epilogue.wgsl's defs."""
    types = type_defs(X_T=ctx.input_dtype(0), W_T=ctx.input_dtype(1), Y_T=ctx.output_tensor(0).dtype)
    defs |= {**types, **epilogue.defs()}
    if ctx.has_input(2):
        defs |= {**type_defs(B_T=ctx.input_dtype(2)), "HAS_BIAS": True, "BIND_B": len(reads)}
        reads.append(ctx.input(2))
    if epilogue.residual is not None:
        defs |= {"RESIDUAL": True, "BIND_R": len(reads)}
        reads.append(ctx.input(epilogue.residual))
    defs["BIND_Y"] = len(reads)


def _known(ctx: PlanCtx, i: int) -> object | None:
    tensor = ctx.input_tensor(i)
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    if source is None or (isinstance(source, np.ndarray) and source.dtype == object):
        return None
    return source


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def conv_shape(ctx: PlanCtx, window: Window, cg: int, mg: int, transpose: bool, weight: int = 1) -> ConvShape:
    """The variant rules' view of this conv; W (input `weight`) can be packed when it is known at compile time.
    The spatial dims may be symbolic: every tiled kernel takes them as run-time values (immediates) and
    linearises its workgroup grid, so no kernel choice depends on them."""
    volume = window.volume()
    kernel = static_dims(volume[f"K{a}"] for a in "DHW")
    if kernel is None:  # the ops require W's dims static before they get here
        raise ctx.error(f"has a symbolic kernel {list(window.kernel)}; expected W's dims static")
    return ConvShape(
        transpose=transpose,
        packable=_known(ctx, weight) is not None,
        cg=cg,
        mg=mg,
        kernel=kernel,
        strides=tuple(window.strides),
        pads=(*window.pads_begin, *window.pads_end),
    )


def packed_weights(ctx: PlanCtx, epilogue: ConvEpilogue, group: int, taps: int, mg: int, columns: int) -> BufferRef:
    """W ([M, CG, k...], `taps` = CG * k... per output channel) as `[G][taps][columns]` (see the module docstring);
    an integer conv's as `[G][taps][columns / 4]` u32 words, a channel quad's 4 bytes in each."""
    tensor = ctx.input_tensor(epilogue.weight)
    source = _known(ctx, epilogue.weight)
    integer = epilogue.weight_zero_point is not None
    count = group * taps * (columns // 4 if integer else columns)
    key = f"{tensor.name}:conv-packed-{columns}" + ("-bytes" if integer else "")

    def load() -> np.ndarray:
        data = source.numpy() if isinstance(source, TensorValue) else np.asarray(source)
        w = data.reshape(group, mg, taps).transpose(0, 2, 1)  # [G, K, MG]
        packed = np.zeros((group, taps, columns), np.uint8 if integer else data.dtype)
        packed[:, :, :mg] = w.view(np.uint8) if integer else w
        return packed.reshape(-1).view("<u4") if integer else packed.reshape(-1)

    dtype = DataType.UINT32 if integer else tensor.dtype
    return ctx.constant(key, TensorValue(dtype, (count,), load, name=key))


def _items(count: int) -> str:
    """An unrolled `#for` loop's items: "0 1 ... count-1"."""
    return " ".join(str(i) for i in range(count))


def plan_tiled(ctx: PlanCtx, window: Window, group: int, variant: ConvVariant, epilogue: ConvEpilogue) -> None:
    """Dispatch `variant`'s kernel for this conv (x input 0, W where `epilogue` says) with `epilogue`.

    The spatial dims (H, W, OH, OW, the pixel count P and the tile counts) are literals when static and
    immediates when symbolic; the grid is one linear count of workgroups (the runtime folds an x above the
    adapter's per-dimension limit into y, the kernels rebuild their index as ``wid.x + wid.y * nwg.x``), so
    any image size runs in one plan."""
    w = ctx.require_static(epilogue.weight)
    c, m = w[1] * group, w[0]
    cg, mg = c // group, m // group
    volume = window.volume()
    pixels = volume["OD"] * volume["OH"] * volume["OW"]
    kernel = variant.kernel
    defs: dict[str, object] = {"LANES": variant.lanes}
    if epilogue.weight_zero_point is not None:
        defs["INTEGER"] = True
    # vec4s of output channels per lane: all the group's where the lanes run over pixels
    vpl = _cdiv(mg, 4) if variant.pixel_lanes else variant.channels // 4
    quads = _cdiv(_cdiv(mg, 4), vpl) * vpl
    wide = variant.pixels * (variant.lanes if variant.pixel_lanes else 1)  # output pixels per workgroup
    taps = cg * int(np.prod(w[2:]))
    if kernel == "depthwise":
        weights = ctx.input(epilogue.weight)
    else:
        weights = packed_weights(ctx, epilogue, group, taps, mg, quads * 4)
    reads = [ctx.input(0), weights]
    epilogue.bind(ctx, reads, defs)
    dims: dict[str, SymbolicDim] = {"G": group, "C": c, "M": m, "CG": cg, "MG": mg, "P": pixels, **volume}
    batch = ctx.input_dims(0)[0]
    if kernel == "depthwise":
        runs = volume["OD"] * volume["OH"] * ceil_div(volume["OW"], 4)
        blocks = ceil_div(runs, variant.lanes)  # workgroups per output channel
        dims |= {"OWQ": ceil_div(volume["OW"], 4), "QUADS": runs, "BLOCKS": blocks}
        if variant.shared_w:
            defs["SUBGROUP_W"] = True
        per_image = blocks * m
    else:
        owt = ceil_div(volume["OW"], wide)
        span = (variant.pixels - 1) * window.strides[-1] + (w[-1] - 1) * window.dilations[-1] + 1
        defs |= {"PIX": variant.pixels, kernel.upper(): True, "PIXELS": _items(variant.pixels)}
        defs |= {"QUADS_OF_PIX": _items(variant.pixels // 4), "SPANS": _items(span), "KWS": _items(w[-1])}
        tiles = ceil_div(pixels, wide) if kernel == "pointwise" else volume["OD"] * volume["OH"] * owt
        dims |= {"MGQ": quads, "KG": taps, "OWT": owt, "TILES": tiles}
        defs |= {"VPL": vpl, "VECS": _items(vpl)}
        flags = {"SUBGROUP_X": variant.shared_x, "PIXEL_LANES": variant.pixel_lanes}
        defs |= {k: True for k, on in flags.items() if on} | ({"SUBGROUPS": True} if any(flags.values()) else {})
        per_image = group * _cdiv(quads // vpl, variant.lanes) * tiles
    workgroups = per_image * batch
    dims["WORKGROUPS"] = workgroups
    label = f"{_LABELS[kernel]}@{variant.name}"
    for vec4, share in _x_reads(kernel, variant, pixels):
        shader = ctx.compile_shader(label, _SOURCES[kernel], defs | ({"X_VEC4": True} if vec4 else {}), dims)
        ctx.dispatch(shader, reads, [ctx.output(0)], workgroups * share)


def _x_reads(kernel: str, variant: ConvVariant, pixels: SymbolicDim) -> list[tuple[bool, SymbolicDim]]:
    """(X_VEC4, the share of the grid it runs) per kernel to dispatch. POINTWISE reads x four pixels at a time
    where every image plane starts on a vec4 (P % 4 == 0), which took 0.87-0.93x the scalar reads' GPU time on
    lavapipe (1 x 1 convs of 32 -> 48 and 64 -> 64 channels at 56 x 160). An open P decides at run time: both
    kernels are planned and the one whose condition fails dispatches 0 workgroups, so the runtime skips it."""
    if kernel != "pointwise" or variant.pixels % 4:
        return [(False, 1)]
    if isinstance(pixels, int):
        return [(pixels % 4 == 0, 1)]
    aligned = 1 - (pixels % 4 + 3) // 4  # 1 when P % 4 == 0, else 0
    return [(True, aligned), (False, 1 - aligned)]
