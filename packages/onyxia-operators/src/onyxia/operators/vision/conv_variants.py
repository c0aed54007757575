"""Which kernel runs a Conv: one table of variants, the first that fits the conv's shape and the adapter wins.

A variant names a kernel (``conv_gemm.wgsl`` as ROWS or POINTWISE, ``conv_depthwise.wgsl``, or ``conv.wgsl``,
the direct one-invocation-per-output kernel that also serves ConvTranspose), the conditions it needs of the
conv (`ConvShape`) and of the adapter (`Needs`, as the matmul variants), and its tile. The chosen row's name
ends the shader label (``vision/conv_gemm@rows``), so a compiled plan records it. ``force_variants({"conv":
name})`` (`onyxia.core.adapter_facts`) picks a row by name; a forced row that does not fit the conv is an
error, so the tests can run every kernel on lavapipe.

Tiles (the CPU rows, measured on lavapipe, Mesa 25.0 / LLVM 15 on 2 AMD EPYC cores): every storage load there
runs lane by lane (a bounds-checked scalar load per lane and vector component, ~100x an 8-lane FMA), whether or not
its address is the same for all lanes, so a tile is sized to feed many sums per loaded value. 8 lanes x 4 output
channels x 8 pixels won: 16 pixels or 8 channels per lane spill more than they save (within noise), 4 pixels is
~1.5x slower. Against the direct kernel (one invocation per output) the GEMM rows are 5-7x faster on YOLO-sized
3 x 3 and 1 x 1 convs, the depthwise row ~2x. The ``_simd`` rows (a CPU rasteriser opened with subgroups, as
the runtime opens lavapipe) let one lane load each x value that all lanes read and share it by subgroupBroadcast;
they took 0.7-1.0x the plain rows' CPU time on four YOLO-sized convs (a shared machine: ~20% noise). GPUs get
16-lane (GEMM) and 64-lane (depthwise) workgroups, where per-lane loads are cheap; not measured here.

The ``_few`` rows turn the lanes over pixels (PIXEL_LANES): a lane owning 4 channels leaves most lanes of a
workgroup idle when a group has few output channels (an 8-channel group fills 2 of 8, and lavapipe runs the idle
lanes' FMAs all the same), so there each lane takes PIX pixels of its own and all the group's channels, and the
weights, now the same for every lane, are loaded once and broadcast. Forced A/B against the ``_simd`` rows in one
process (CPU ms, medians of 5, load ~5 on 2 cores): basic_pitch's 8 -> 8 3 x 39 187 -> 78, 8 -> 1 5 x 5
29 -> 9, 32 -> 1 7 x 3 96 -> 28; rivagan's 32 -> 3 11 x 11 164 -> 22 and 32 -> 32 11 x 11 297 -> 208; 16 -> 12
3 x 3 18 -> 13, 16 -> 16 24 -> 22, 16 -> 16 7 x 7 stride (1, 3) 133 -> 92; 32 -> 32 7 x 7 131 -> 92, 3 -> 32
11 x 11 77 -> 67; but 32 -> 32 3 x 3 32 -> 44 and 64 -> 64 24 -> 55 (`FEW_CHANNELS`), and 1 -> 32 7 x 7 52 -> 89
(one input channel: the depthwise row, first in the table, takes those). PIX 4 or
16 instead of 8 was within noise on the wide windows (3 x 39: 77 / 76 vs 78) and worse on 11 x 11 (28 / 41 vs
22), as was PIX 16 for the ``_simd`` rows (11 x 11, 32 -> 32: 279 vs 297; 3 x 3: 1.1-1.2x slower).

The ``depthwise_simd`` row is the depthwise kernel with its weights (the same for every lane of a workgroup,
one channel) loaded by one lane and broadcast; with the kernel's skipping of window rows that lie in the padding
it took ppocr_cls's GPU time from 57-61 to 47 ms (PP-LCNet's 5 x 5 depthwise convs on 2- and 3-row maps: 3.8 ->
2.2 ms each).

ConvInteger and QLinearConv take the same rows (the kernels' INTEGER mode, quantized/conv_integer.py), whose
`direct` row is quantized/conv_integer.wgsl. Their packed weights are a quarter of the float loads (4 bytes to a
u32), so x's loads dominate instead: on ddddocr-shaped 3 x 3 convs 8 channels per lane took 0.82-0.96x the
4-channel rows' GPU time and 16 pixels 1.17-1.26x, 1 x 1 convs were best at 4 x 8; within this machine's noise of
the shared rows, so they stay shared. The ``_simd`` rows, sharing each x load, took 0.69-0.80x on the 3 x 3 ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from onyxia.core import PlanningError
from onyxia.core.adapter_facts import adapter_facts, forced_variant
from onyxia.operators.matmul.variants import Needs

__all__ = ["FAMILY", "FEW_CHANNELS", "few_channels", "VARIANTS", "ConvShape", "ConvVariant", "choose_variant"]

FAMILY = "conv"  # the `force_variants` key of this table


@dataclass(frozen=True)
class ConvShape:
    """What the variant rules read of one Conv (forward convs; ConvTranspose is always `direct`). No rule reads
    the spatial dims: every tiled kernel takes them at run time (immediates when symbolic) over a linear grid."""

    transpose: bool
    packable: bool  # W is known at compile time (an initializer or a folded constant)
    cg: int  # input channels per group
    mg: int  # output channels per group
    kernel: tuple[int, ...]  # KD, KH, KW
    strides: tuple[int, ...]
    pads: tuple[int, ...]  # begin then end, per axis

    @property
    def forward(self) -> bool:
        return not self.transpose


def _depthwise(s: ConvShape) -> bool:
    return s.forward and s.cg == 1


def _pointwise(s: ConvShape) -> bool:
    one = all(k == 1 for k in s.kernel) and all(v == 1 for v in s.strides) and not any(s.pads)
    return s.forward and s.packable and one


def _rows(s: ConvShape) -> bool:
    return s.forward and s.packable


# (most output channels per group, fewest kernel taps per input channel) where the pixel-lane rows win: each
# lane holds all of a group's channels for PIX pixels, which stops paying past 16 channels on small windows (32 ->
# 32 3 x 3: 1.4x slower, 64 -> 64: 2.3x), while wide windows, whose weight loads dominate, still gain at 32
FEW_CHANNELS: tuple[tuple[int, int], ...] = ((16, 1), (32, 49))


def few_channels(mg: int, kernel: tuple[int, ...]) -> bool:
    """Whether a conv with `mg` output channels per group and this kernel takes the pixel-lane rows."""
    taps = math.prod(kernel)
    return any(mg <= most and taps >= fewest for most, fewest in FEW_CHANNELS)


def _few(s: ConvShape) -> bool:
    return few_channels(s.mg, s.kernel)


def _pointwise_few(s: ConvShape) -> bool:
    return _pointwise(s) and _few(s)


def _rows_few(s: ConvShape) -> bool:
    return _rows(s) and _few(s)


def _any(s: ConvShape) -> bool:
    return True


@dataclass(frozen=True)
class ConvVariant:
    """One way to run a Conv (see the module docstring)."""

    name: str
    kernel: str  # "pointwise" | "rows" | "depthwise" | "direct"
    fits: Callable[[ConvShape], bool]
    needs: Needs = field(default_factory=Needs)
    lanes: int = 8  # invocations per workgroup
    pixels: int = 8  # output pixels per workgroup (gemm kernels)
    channels: int = 4  # output channels per lane (gemm kernels; a multiple of 4)
    shared_x: bool = False  # gemm kernels: one lane loads each x value, a subgroup broadcast shares it
    shared_w: bool = False  # depthwise kernel: one lane loads each weight, a subgroup broadcast shares it
    pixel_lanes: bool = False  # gemm kernels: each lane its own pixels and all channels (the weights shared)


_CPU = Needs(cpu=True)
_CPU_SUBGROUPS = Needs(cpu=True, subgroups=True)
_GPU = Needs(invocations=64)  # every adapter WebGPU allows has 256

VARIANTS: tuple[ConvVariant, ...] = (
    ConvVariant("depthwise_simd", "depthwise", _depthwise, _CPU_SUBGROUPS, lanes=8, shared_w=True),
    ConvVariant("depthwise", "depthwise", _depthwise, _CPU, lanes=8),
    ConvVariant("pointwise_few", "pointwise", _pointwise_few, _CPU_SUBGROUPS, pixel_lanes=True),
    ConvVariant("rows_few", "rows", _rows_few, _CPU_SUBGROUPS, pixel_lanes=True),
    ConvVariant("pointwise_simd", "pointwise", _pointwise, _CPU_SUBGROUPS, shared_x=True),
    ConvVariant("rows_simd", "rows", _rows, _CPU_SUBGROUPS, shared_x=True),
    ConvVariant("pointwise", "pointwise", _pointwise, _CPU),
    ConvVariant("rows", "rows", _rows, _CPU),
    ConvVariant("depthwise_gpu", "depthwise", _depthwise, _GPU, lanes=64),
    ConvVariant("pointwise_gpu", "pointwise", _pointwise, _GPU, lanes=16),
    ConvVariant("rows_gpu", "rows", _rows, _GPU, lanes=16),
    ConvVariant("direct", "direct", _any),
)


def choose_variant(shape: ConvShape, where: str) -> ConvVariant:
    """The forced row (which must fit), else the first row that fits the conv and the adapter."""
    forced = forced_variant(FAMILY)
    if forced is not None:
        row = next((v for v in VARIANTS if v.name == forced), None)
        if row is None:
            raise PlanningError(f"{where}: no conv variant '{forced}' (known: {', '.join(v.name for v in VARIANTS)})")
        if not row.fits(shape):
            raise PlanningError(f"{where}: the forced conv variant '{forced}' does not fit {shape}")
        return row
    facts = adapter_facts()
    return next(v for v in VARIANTS if v.fits(shape) and v.needs.met_by(facts))
