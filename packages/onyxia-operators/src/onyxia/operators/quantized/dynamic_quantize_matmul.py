"""com.microsoft DynamicQuantizeMatMul, and com.onyxia DynamicQuantizeMatMulGroup / GatedDynamicQuantizeMatMul.

``DynamicQuantizeMatMul(A, B, b_scale, b_zero_point?, bias?)`` is onnxruntime's fusion of quantize_dynamic's
``DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul`` (and MatMulIntegerToFloat): A is float and quantized to
uint8 per tensor inside the op, so no quantized copy of A goes to memory and no separate dispatch computes it.
``DynamicQuantizeMatMulGroup(A, B0, b_scale0, b_zero_point0, bias0, B1, ...) -> Y0, Y1, ...`` is up to 4 of them
reading one A (q/k/v, gate/up) in one dispatch, four inputs per weight as DynamicQuantizeMatMul's, any zero
point / bias empty (all weights alike); ``GatedDynamicQuantizeMatMul`` (two weights, no bias, attributes
`activation` and `approximate` as GatedMatMul's) is ``act(Y0) * Y1``. `quantized.integer_fusions` makes them.

Semantics are onnxruntime's CPU kernels: A's scale and zero point as DynamicQuantizeLinear's over every value of
A, the exact int32 product, then ``f32(sum) * (a_scale * b_scale[n]) (+ bias[n])``; B is 2-D [K, N] of int8 or
uint8, b_scale and b_zero_point one element or one per column. The kernel is dynamic_quantize_matmul.wgsl: while
A has at most `self_rows(K)` rows (a decode step) each workgroup reduces A's range itself, so the op is one
dispatch; a longer A (prefill) first runs DynamicQuantizeLinear's kernel for the scale and zero point only, since
every workgroup reading all of a long A would cost rows x A.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    TensorType,
    UnsupportedOpError,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import type_defs
from onyxia.operators.matmul.matmul_group import gate_activation, gated_numpy
from onyxia.operators.matmul.tiles import at_most
from onyxia.operators.quantized.dynamic_quantize_linear import dispatch_dynamic_quantize, dynamic_quantize
from onyxia.operators.quantized.matmul_integer import integer_matmul, packed_columns

__all__ = ["DYNAMIC_QUANTIZE_MATMUL", "DYNAMIC_QUANTIZE_MATMUL_MS", "DynamicQuantizeMatMulOp", "self_rows"]

MAX_SLOTS = 4  # the shader's slots
_WG = 64  # invocations per workgroup, 4 columns each
_TILE_WORDS = 1024  # quantized words of a row held in workgroup memory at a time (4 KiB)
# A workgroup reduces A's range itself while A has at most this many values: 64 loads per invocation at most,
# against the K vec4 loads of weights each invocation makes anyway.
_SELF_REDUCE_VALUES = 4096
_BYTES = frozenset({DataType.UINT8, DataType.INT8})
_NAMES = ("B", "b_scale", "b_zero_point", "bias")


def self_rows(k: int) -> int:
    """Rows of A up to which every workgroup reduces A's range itself (at least 1: a decode step's row)."""
    return max(1, _SELF_REDUCE_VALUES // max(k, 1))


@dataclass(frozen=True)
class DynamicQuantizeMatMulOp(OperatorBase):
    grouped: bool = False  # one output per weight (the com.onyxia group)
    gated: bool = False
    name: str = "DynamicQuantizeMatMul"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        ns = self._check(ctx)
        rows = list(ctx.input_dims(0)[:-1])
        return [TensorType(DataType.FLOAT, shape_of([*rows, n])) for n in ns[: 1 if self.gated else None]]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        found = {i: ctx.input_value(i) for i in range(ctx.num_inputs) if ctx.has_input(i)}
        values = {i: v for i, v in found.items() if v is not None and v.dtype != object}
        if len(values) < len(found):
            return None
        q, scale, zero_point = dynamic_quantize(values[0])
        products = []
        for s in range(_slot_count(ctx)):
            b, b_scale, b_zp, bias = (values.get(1 + 4 * s + j) for j in range(4))
            assert b is not None and b_scale is not None, "checked by infer_output_shapes"
            product = integer_matmul(q, b, zero_point, b_zp).astype(np.float32) * (scale * b_scale.reshape(-1))
            products.append((product + bias if bias is not None else product).astype(np.float32))
        if self.gated:
            return [gated_numpy(gate_activation(ctx), products[0], products[1])]
        return products

    def plan(self, ctx: PlanCtx) -> None:
        _plan(ctx, self._check(ctx), gate_activation(ctx) if self.gated else None)

    def _check(self, ctx: NodeCtx) -> list[int]:
        """Each weight's N, after checking A, the weights and their scales, zero points and biases."""
        slots = _slot_count(ctx)
        if not self.grouped and ctx.num_inputs > 5:
            raise ctx.error(f"has {ctx.num_inputs} inputs; expected at most 5 (A, B, b_scale, b_zero_point, bias)")
        if (self.grouped and not 1 <= slots <= MAX_SLOTS) or (self.gated and slots != 2):
            raise ctx.error(
                f"has {ctx.num_inputs} inputs; expected A and {'2' if self.gated else f'1 to {MAX_SLOTS}'} "
                "weights of four inputs each (B, b_scale, b_zero_point, bias)"
            )
        if ctx.input_dtype(0) != DataType.FLOAT:
            raise UnsupportedOpError(
                f"node '{ctx.node.name}' ({ctx.node.op_type}): input 0 (A) dtype "
                f"{ctx.input_dtype(0).name.lower()} is not implemented (supported: float32)"
            )
        if ctx.input_rank(0) == 0:
            raise ctx.error("input 0 (A) is a scalar; MatMul operands have rank >= 1")
        k = ctx.input_dims(0)[-1]
        ns = [_check_slot(ctx, s, k) for s in range(slots)]
        present = [tuple(ctx.has_input(1 + 4 * s + j) for j in (2, 3)) for s in range(slots)]
        if any(p != present[0] for p in present) or len({ctx.input_dtype(1 + 4 * s) for s in range(slots)}) > 1:
            raise ctx.error("weights differ in dtype or in having a zero point / bias; a group's must not")
        if self.gated and (present[0][1] or ns[0] != ns[1]):
            raise ctx.error(f"a gated product takes two weights of equal N and no bias, found N {ns}")
        return ns


def _slot_count(ctx: NodeCtx) -> int:
    return (ctx.num_inputs - 1 + 3) // 4


def _check_slot(ctx: NodeCtx, s: int, k: SymbolicDim) -> int:
    first = 1 + 4 * s
    b, scale, zero_point, bias = first, first + 1, first + 2, first + 3
    where = f"input {b} (B{'' if s == 0 else s})"
    if not ctx.has_input(b) or not ctx.has_input(scale):
        raise ctx.error(f"weight {s} has no {'B' if not ctx.has_input(b) else 'b_scale'}; both are required")
    if ctx.input_dtype(b) not in _BYTES:
        raise ctx.error(f"{where} has dtype {ctx.input_dtype(b).name.lower()}; expected uint8 or int8")
    dims = list(ctx.input_dims(b))
    if len(dims) != 2 or not isinstance(dims[1], int):
        raise UnsupportedOpError(
            f"node '{ctx.node.name}' ({ctx.node.op_type}): {where} has dims {dims}; only a 2-D B [K, N] with a "
            "static N is implemented"
        )
    if dims[0] != k:
        raise ctx.error(f"{where} dim 0 ({dims[0]}) must equal input 0 dim -1 ({k})")
    n = dims[1]
    for i, what, dtype in ((scale, "b_scale", DataType.FLOAT), (zero_point, "b_zero_point", ctx.input_dtype(b))):
        if not ctx.has_input(i):
            continue
        if ctx.input_dtype(i) != dtype:
            raise ctx.error(
                f"input {i} ({what}) has dtype {ctx.input_dtype(i).name.lower()}; expected {dtype.name.lower()}"
            )
        found = list(ctx.input_dims(i))
        if dims_product(found) != 1 and not (found and found[-1] == n and all(d == 1 for d in found[:-1])):
            raise UnsupportedOpError(
                f"node '{ctx.node.name}' ({ctx.node.op_type}): input {i} ({what}) has dims {found}; expected one "
                f"element or one per column ([{n}], leading 1s allowed)"
            )
    if ctx.has_input(bias) and (ctx.input_dtype(bias) != DataType.FLOAT or list(ctx.input_dims(bias)) != [n]):
        raise ctx.error(
            f"input {bias} (bias) has {ctx.input_dtype(bias).name.lower()}{ctx.input_shape(bias)}; expected f32[{n}]"
        )
    return n


def _plan(ctx: PlanCtx, ns: list[int], activation: str | None) -> None:
    m = dims_product(ctx.input_dims(0)[:-1])
    k = ctx.input_dims(0)[-1]
    if not isinstance(k, int):  # B [K, N] is 2-D data with a static N; only a symbolic A could make K symbolic
        raise UnsupportedOpError(f"node '{ctx.node.name}' ({ctx.node.op_type}): K = {k}; a static K is needed")
    if m == 0 or 0 in ns:
        return  # an empty output
    slots = len(ns)
    first = [1 + 4 * s for s in range(slots)]
    packed = [packed_columns(ctx, b, k, n) for b, n in zip(first, ns)]
    if slots > 1 and None in packed:
        raise UnsupportedOpError(
            f"node '{ctx.node.name}' ({ctx.node.op_type}): grouped weights must be compile-time data"
        )
    b_dtype = ctx.input_dtype(1)
    defs: dict[str, object] = {
        **type_defs(B_T=b_dtype, Y_T=DataType.FLOAT),
        "B_XOR": "0x80u" if b_dtype == DataType.INT8 else "0u",
        "WORKGROUP_SIZE": _WG,
        "TILE": max(1, min((k + 3) // 4, _TILE_WORDS)),
        "SELF_ROWS": self_rows(k),
        "OTHER_SLOTS": " ".join(str(s) for s in range(1, slots)),
    }
    reads = {"A": ctx.input(0)}
    small = at_most(m, self_rows(k))  # 1 while every workgroup reduces A itself (0 or 1 per run when symbolic)
    if small != 1:
        a_params = [ctx.alloc_scratch(4, "a_scale"), ctx.alloc_scratch(4, "a_zero_point")]
        dispatch_dynamic_quantize(ctx, ctx.input(0), m * k, a_params, 1 - small)
        reads |= {"A_SCALE": a_params[0], "A_ZP": a_params[1]}
        defs["A_PARAMS"] = True
    if small != 0:
        defs["SELF_REDUCE"] = True
    if None not in packed:
        defs["PACKED_B"] = True
    for s, b in enumerate(first):
        weight = packed[s]
        reads[f"B{s}"] = weight if weight is not None else ctx.input(b)
        reads[f"SCALE{s}"] = ctx.input(b + 1)
        if ctx.has_input(b + 2):
            reads[f"ZP{s}"] = ctx.input(b + 2)
            defs["BZP"] = True
            defs["BZP_COLUMNS"] = dims_product(ctx.input_dims(b + 2)) != 1 or defs.get("BZP_COLUMNS", False)
        if ctx.has_input(b + 3):
            reads[f"BIAS{s}"] = ctx.input(b + 3)
            defs["BIAS"] = True
        defs["SCALE_COLUMNS"] = dims_product(ctx.input_dims(b + 1)) != 1 or defs.get("SCALE_COLUMNS", False)
    defs = {key: value for key, value in defs.items() if value is not False}
    outputs = 1 if activation is not None else slots
    if activation is not None:
        defs |= {"GATED": True, "ACTIVATION": activation}
    defs |= {f"BIND_{name}": i for i, name in enumerate([*reads, *(f"Y{s}" for s in range(outputs))])}
    per_slot = [ceil_div(n, 4 * _WG) for n in ns]
    dims: dict[str, SymbolicDim] = {"M": m, "K": k, "K4": ceil_div(k, 4), **{f"N{s}": n for s, n in enumerate(ns)}}
    dims |= {f"G{s}": sum(per_slot[:s]) for s in range(1, slots)}
    source = load_wgsl(__package__, "dynamic_quantize_matmul.wgsl")
    shader = ctx.compile_shader(ctx.node.op_type, source, defs, dims)
    groups = per_slot[0] if activation is not None else sum(per_slot)
    ctx.dispatch(shader, list(reads.values()), [ctx.output(s) for s in range(outputs)], (groups, m, 1))


DYNAMIC_QUANTIZE_MATMUL_MS: dict[str, DynamicQuantizeMatMulOp] = {"DynamicQuantizeMatMul": DynamicQuantizeMatMulOp()}
DYNAMIC_QUANTIZE_MATMUL: dict[str, DynamicQuantizeMatMulOp] = {  # com.onyxia
    "DynamicQuantizeMatMulGroup": DynamicQuantizeMatMulOp(grouped=True, name="DynamicQuantizeMatMulGroup"),
    "GatedDynamicQuantizeMatMul": DynamicQuantizeMatMulOp(grouped=True, gated=True, name="GatedDynamicQuantizeMatMul"),
}
