"""What QuantizeLinear and DequantizeLinear share: where each element's scale and zero point come from
(per tensor, per axis, or per block along the axis), the checks the spec puts on them, and one kernel.

The layout follows the spec (opset 21): a scalar (or one-element) scale applies to the whole tensor;
a 1-D scale of x's dim at `axis` applies per slice; with `block_size` B > 0 the scale has x's rank and
shape except ceil(x_dim / B) at `axis`, and element a along the axis uses entry a // B. The zero point,
when given, has the scale's shape and the quantized dtype. Operands of 4 bits stay packed
(`onyxia.core.dtypes`): the kernel reads their nibbles and writes a 4-bit output a word at a time.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from onyxia.core import DataType, FoldCtx, NodeCtx, PlanCtx, SymbolicDim, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.elementwise.cast_4bit import nibble_defs, value_dtype
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs

__all__ = [
    "QUANTIZED_RANGE",
    "ParamLayout",
    "dtype_attribute",
    "emit_linear_quant",
    "expand_params",
    "known_params",
    "param_layout",
]

_SOURCE = load_wgsl(__package__, "linear_quant.wgsl")

QUANTIZED_RANGE: dict[DataType, tuple[int, int]] = {
    DataType.UINT8: (0, 255),
    DataType.INT8: (-128, 127),
    DataType.UINT16: (0, 65535),
    DataType.INT16: (-32768, 32767),
    DataType.UINT4: (0, 15),
    DataType.INT4: (-8, 7),
}


class ParamLayout(NamedTuple):
    mode: str  # "tensor", "axis" or "block"
    axis: int  # x's axis (0 per tensor)
    block: int  # elements of x per scale entry along the axis (1 unless blocked)


def dtype_attribute(ctx: NodeCtx, name: str) -> DataType | None:
    """A dtype-code attribute (``output_dtype``); None when absent or 0, an error when no ONNX code."""
    code = ctx.attr_int(name, 0)
    if code == 0:
        return None
    try:
        return DataType(code)
    except ValueError:
        raise ctx.error(f"attribute '{name}' is {code}, which is not an ONNX data type") from None


def param_layout(ctx: NodeCtx, x: int = 0, scale: int = 1, zero: int = 2) -> ParamLayout:
    """How input `scale` (and `zero`) map onto input `x`, checked against the spec."""
    x_dims, s_dims = list(ctx.input_dims(x)), list(ctx.input_dims(scale))
    block = ctx.attr_int("block_size", 0)
    z_dims = list(ctx.input_dims(zero)) if ctx.has_input(zero) else s_dims
    if z_dims != s_dims and not (_per_tensor(z_dims) and _per_tensor(s_dims)):  # [] and [1] are alike
        raise ctx.error(
            f"input {zero} (zero point) has dims {list(ctx.input_dims(zero))}; expected the scale's {s_dims}"
        )
    if block < 0:
        raise ctx.error(f"attribute 'block_size' = {block}; expected 0 (per tensor or axis) or a positive block size")
    if block == 0 and _per_tensor(s_dims):
        return ParamLayout("tensor", 0, 1)
    axis = ctx.normalize_axis(ctx.attr_int("axis", 1), len(x_dims))
    if block == 0:
        if s_dims != [x_dims[axis]]:
            raise ctx.error(f"input {scale} (scale) has dims {s_dims}; expected [] or [{x_dims[axis]}] (x dim {axis})")
        return ParamLayout("axis", axis, 1)
    expected = [ceil_div(d, block) if k == axis else d for k, d in enumerate(x_dims)]
    if s_dims != expected:
        raise ctx.error(
            f"input {scale} (scale) has dims {s_dims}; with block_size {block} along axis {axis} expected {expected}"
        )
    return ParamLayout("block", axis, block)


def known_params(ctx: FoldCtx) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, ParamLayout] | None:
    """x, scale, zero point (None when absent) and their layout, when every given input is known as numbers:
    what Quantize- and DequantizeLinear fold from (symbolic values are not)."""
    known = [ctx.input_value(i) for i in range(ctx.num_inputs) if ctx.has_input(i)]
    values = [v for v in known if v is not None and v.dtype != object]
    if len(values) < len(known):
        return None
    return values[0], values[1], values[2] if len(values) > 2 else None, param_layout(ctx)


def _per_tensor(dims: list[SymbolicDim]) -> bool:
    return not dims or dims == [1]


def expand_params(param: np.ndarray, layout: ParamLayout, x_shape: tuple[int, ...]) -> np.ndarray:
    """A scale or zero point broadcast to every element of x (host folding)."""
    if layout.mode == "tensor":
        return param.reshape(())
    if layout.mode == "axis":
        return param.reshape([-1 if k == layout.axis else 1 for k in range(len(x_shape))])
    repeated = np.repeat(param, layout.block, axis=layout.axis)
    return np.take(repeated, np.arange(x_shape[layout.axis]), axis=layout.axis)


def emit_linear_quant(ctx: PlanCtx, layout: ParamLayout, quantize: bool) -> None:
    """One dispatch: inputs x, scale[, zero point] -> output 0 (`linear_quant.wgsl` states the math)."""
    x_t, s_t, y_t = ctx.input_dtype(0), ctx.input_dtype(1), ctx.output_tensor(0).dtype
    z_t = ctx.input_dtype(2) if ctx.has_input(2) else (y_t if quantize else x_t)
    x_dims = list(ctx.input_dims(0))
    n = dims_product(ctx.output_dims(0))
    if n == 0:
        return
    reads = [ctx.input(i) for i in range(3) if ctx.has_input(i)]
    defs = {
        **type_defs(X_T=x_t, S_T=s_t, Z_T=z_t, Y_T=y_t),
        "XV_T": value_dtype(x_t).wgsl,
        "ZV_T": value_dtype(z_t).wgsl,
        "PARAMS": layout.mode,
        "OUT_BINDING": len(reads),
        "WORKGROUP_SIZE": WORKGROUP_SIZE,
        **nibble_defs("X", x_t),
        **nibble_defs("Z", z_t),
    }
    if ctx.has_input(2):
        defs["ZERO_POINT"] = True
    if quantize:
        lo, hi = QUANTIZED_RANGE[y_t]
        defs.update(QUANTIZE=True, LO=f"{lo}.0", HI=f"{hi}.0")
    units = n
    if y_t.is_packed:
        units = ceil_div(n, 8)
        defs["Y_PACKED"] = True
    dims: dict[str, SymbolicDim] = {"N": n, "UNITS": units}
    if layout.mode != "tensor":
        dims.update(INNER=dims_product(x_dims[layout.axis + 1 :]), AXIS=x_dims[layout.axis])
    if layout.mode == "block":
        dims.update(BLOCK=layout.block, SCALE_AXIS=ctx.input_dims(1)[layout.axis])
    label = "quantized/quantize_linear" if quantize else "quantized/dequantize_linear"
    shader = ctx.compile_shader(label, _SOURCE, defs, dims)
    ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(units, WORKGROUP_SIZE))
