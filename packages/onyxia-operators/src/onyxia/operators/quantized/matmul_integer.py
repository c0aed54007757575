"""ONNX MatMulInteger and com.microsoft MatMulIntegerToFloat: 8-bit products summed exactly in int32.

onnxruntime's `quantize_dynamic` (the onnx-community ``_int8`` / ``_uint8`` files) turns every MatMul by a
constant weight into ``DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_scale * b_scale)``;
``fuse_cast_mul_into_MatMulInteger`` (`quantized.fusions`) folds the Cast and Mul into MatMulIntegerToFloat,
the op onnxruntime's own graph optimizer makes of them, so the int32 product never goes to memory.

Semantics are onnxruntime's CPU kernels (not only the spec's): uint8 or int8 A and B in any combination,
numpy batch broadcasting; a_zero_point one element (onnxruntime refuses the spec's per-row form); b_zero_point
and b_scale one element or one per column (shape [N], leading 1s allowed); a_scale one element; bias [N].
A compile-time B without batch (a weight) is repacked 4 bytes per u32 in column panels, so a decode
step streams it once; anything else is read as the graph stores it. The shader is matmul_integer.wgsl.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    BufferRef,
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    TensorType,
    TensorValue,
    UnsupportedOpError,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import broadcast_strides, type_defs
from onyxia.operators.quantized.packing import u32_words

__all__ = ["INTEGER_MATMUL", "INTEGER_MATMUL_MS", "IntegerMatMulOp", "integer_matmul", "packed_columns"]

_BYTES = frozenset({DataType.UINT8, DataType.INT8})
_WG = 64  # threads per workgroup, 4 columns each


@dataclass(frozen=True)
class IntegerMatMulOp(OperatorBase):
    """A row: where the optional inputs sit (-1: the op has none)."""

    a_zp: int
    b_zp: int
    scales: int = -1  # a_scale at `scales`, b_scale after it: the float product of MatMulIntegerToFloat
    bias: int = -1
    name: str = "MatMulInteger"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        n = self._check(ctx)
        dims = _output_dims(ctx, n)
        dtype = DataType.FLOAT if self.scales >= 0 else DataType.INT32
        return [TensorType(dtype, shape_of(dims))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = {i: ctx.input_value(i) for i in range(ctx.num_inputs) if ctx.has_input(i)}
        known = {i: v for i, v in values.items() if v is not None and v.dtype != object}
        if len(known) < len(values):
            return None
        product = integer_matmul(known[0], known[1], known.get(self.a_zp), known.get(self.b_zp))
        if self.scales < 0:
            return [product]
        out = product.astype(np.float32) * (known[self.scales].reshape(-1) * known[self.scales + 1].reshape(-1))
        if self.bias in known:
            out = out + known[self.bias]
        return [out.astype(np.float32)]

    def plan(self, ctx: PlanCtx) -> None:
        _plan(ctx, self, self._check(ctx))

    def has(self, ctx: NodeCtx, i: int) -> bool:
        return i >= 0 and ctx.has_input(i)

    def _check(self, ctx: NodeCtx) -> SymbolicDim:
        """N, after checking dtypes and the forms of zero points, scales and bias; names the first problem."""
        for i, what in ((0, "A"), (1, "B")):
            if ctx.input_dtype(i) not in _BYTES:
                raise ctx.error(
                    f"input {i} ({what}) has dtype {ctx.input_dtype(i).name.lower()}; expected uint8 or int8"
                )
            if ctx.input_rank(i) == 0:
                raise ctx.error(f"input {i} ({what}) is a scalar; MatMul operands have rank >= 1")
        n = ctx.input_dims(1)[-1] if ctx.input_rank(1) > 1 else 1
        for i, operand, what in ((self.a_zp, 0, "a_zero_point"), (self.b_zp, 1, "b_zero_point")):
            if self.has(ctx, i) and ctx.input_dtype(i) != ctx.input_dtype(operand):
                found, expected = ctx.input_dtype(i).name.lower(), ctx.input_dtype(operand).name.lower()
                raise ctx.error(
                    f"input {i} ({what}) has dtype {found}; expected {expected}, the dtype of input {operand}"
                )
        if self.has(ctx, self.a_zp):
            _per_tensor(ctx, self.a_zp, "a_zero_point (onnxruntime supports no per-row zero point)")
        if self.has(ctx, self.b_zp):
            _per_column(ctx, self.b_zp, n, "b_zero_point")
        if self.scales >= 0:
            for i, what in ((self.scales, "a_scale"), (self.scales + 1, "b_scale"), (self.bias, "bias")):
                if self.has(ctx, i) and ctx.input_dtype(i) != DataType.FLOAT:
                    raise UnsupportedOpError(
                        f"node '{ctx.node.name}' ({ctx.node.op_type}): input {i} ({what}) dtype "
                        f"{ctx.input_dtype(i).name.lower()} is not implemented (supported: float32)"
                    )
            _per_tensor(ctx, self.scales, "a_scale")
            _per_column(ctx, self.scales + 1, n, "b_scale")
            if self.has(ctx, self.bias) and list(ctx.input_dims(self.bias)) != [n]:
                raise ctx.error(f"input {self.bias} (bias) has dims {list(ctx.input_dims(self.bias))}; expected [{n}]")
        return n


def integer_matmul(a: np.ndarray, b: np.ndarray, a_zp: np.ndarray | None, b_zp: np.ndarray | None) -> np.ndarray:
    """The exact int32 product (numpy's int64 matmul, wrapped to int32 as onnxruntime's accumulator wraps)."""
    za = np.int64(0) if a_zp is None else a_zp.astype(np.int64).reshape(-1)[0]
    zb = np.int64(0) if b_zp is None else b_zp.astype(np.int64).reshape(-1)
    return np.matmul(a.astype(np.int64) - za, b.astype(np.int64) - zb).astype(np.int32)


def _per_tensor(ctx: NodeCtx, i: int, what: str) -> None:
    if dims_product(ctx.input_dims(i)) != 1:
        raise UnsupportedOpError(
            f"node '{ctx.node.name}' ({ctx.node.op_type}): input {i} ({what}) has dims {list(ctx.input_dims(i))}; "
            "expected one element"
        )


def _per_column(ctx: NodeCtx, i: int, n: SymbolicDim, what: str) -> None:
    dims = list(ctx.input_dims(i))
    if dims_product(dims) == 1 or (dims and dims[-1] == n and all(d == 1 for d in dims[:-1])):
        return
    raise UnsupportedOpError(
        f"node '{ctx.node.name}' ({ctx.node.op_type}): input {i} ({what}) has dims {dims}; expected one element "
        f"or one per column ([{n}], leading 1s allowed)"
    )


def _promoted(ctx: NodeCtx) -> tuple[list[SymbolicDim], list[SymbolicDim]]:
    a, b = list(ctx.input_dims(0)), list(ctx.input_dims(1))
    return ([1, *a] if len(a) == 1 else a), ([*b, 1] if len(b) == 1 else b)


def _output_dims(ctx: InferenceCtx, n: SymbolicDim) -> list[SymbolicDim]:
    a, b = _promoted(ctx)
    if a[-1] != b[-2]:
        if isinstance(a[-1], int) and isinstance(b[-2], int):
            raise ctx.error(f"input 1 dim -2 ({b[-2]}) must equal input 0 dim -1 ({a[-1]})")
        ctx.constraints.append((a[-1], b[-2], f"node '{ctx.node.name}' ({ctx.node.op_type}) inner dims"))
    batch = list(ctx.broadcast(a[:-2], b[:-2]).dims)
    return batch + ([a[-2]] if ctx.input_rank(0) > 1 else []) + ([n] if ctx.input_rank(1) > 1 else [])


def packed_columns(ctx: PlanCtx, i: int, k: int, n: int) -> BufferRef | None:
    """Input `i`, a compile-time B [K, N] of bytes, as matmul_integer.wgsl's PACKED_B panels (u8 form,
    zero-padded; dynamic_quantize_matmul.wgsl reads the same), else None."""
    signed = ctx.input_dtype(i) == DataType.INT8
    tensor = ctx.input_tensor(i)
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    if source is None or (isinstance(source, np.ndarray) and source.dtype == object):
        return None
    k4 = -(-k // 4)

    def load() -> np.ndarray:
        data = source.numpy() if isinstance(source, TensorValue) else source
        columns = np.ascontiguousarray(np.asarray(data).reshape(k, n).view(np.uint8).T) ^ np.uint8(
            0x80 if signed else 0
        )
        if isinstance(source, TensorValue):
            source.release()
        out = np.zeros((n, k4 * 4), np.uint8)
        out[:, :k] = columns
        return out

    key = f"{tensor.name}:u8-columns" + (":offset" if signed else "")
    return ctx.constant(key, u32_words(TensorValue(DataType.UINT8, (n, k4 * 4), load, name=key), key, n, 4))


def _plan(ctx: PlanCtx, op: IntegerMatMulOp, n: SymbolicDim) -> None:
    a, b = _promoted(ctx)
    m, k = a[-2], a[-1]
    a_dtype, b_dtype = ctx.input_dtype(0), ctx.input_dtype(1)
    defs: dict[str, object] = {
        **type_defs(A_T=a_dtype, B_T=b_dtype),
        "A_XOR": "0x80u" if a_dtype == DataType.INT8 else "0u",
        "B_XOR": "0x80u" if b_dtype == DataType.INT8 else "0u",
        "WG": _WG,
    }
    batch_free = all(d == 1 for d in b[:-2])
    packed = None
    if batch_free and isinstance(k, int) and isinstance(n, int):
        packed = packed_columns(ctx, 1, k, n)
    batch: list[SymbolicDim] = [1]
    a_strides: list[SymbolicDim] = [0]
    b_strides: list[SymbolicDim] = [0]
    if batch_free:
        m = dims_product([*a[:-2], m])
    else:
        batch = list(ctx.broadcast(a[:-2], b[:-2]).dims)
        a_strides = [s * m * k for s in broadcast_strides(a[:-2], batch)]
        b_strides = [s * k * n for s in broadcast_strides(b[:-2], batch)]
    if 0 in (m, n, dims_product(batch)):
        return  # an empty output (a zero K still writes zeros)
    reads = {"A": ctx.input(0), "B": packed if packed is not None else ctx.input(1)}
    if packed is not None:
        defs["PACKED_B"] = True
    if op.has(ctx, op.a_zp):
        reads["AZP"] = ctx.input(op.a_zp)
    if op.has(ctx, op.b_zp):
        reads["BZP"] = ctx.input(op.b_zp)
        if dims_product(ctx.input_dims(op.b_zp)) != 1:
            defs["BZP_COLUMNS"] = True
    if op.scales >= 0:
        reads |= {"A_SCALE": ctx.input(op.scales), "B_SCALE": ctx.input(op.scales + 1)}
        defs["SCALED"] = True
        if dims_product(ctx.input_dims(op.scales + 1)) != 1:
            defs["SCALE_COLUMNS"] = True
    if op.has(ctx, op.bias):
        reads["BIAS"] = ctx.input(op.bias)
    defs |= {name: True for name in ("AZP", "BZP", "BIAS") if name in reads}
    defs |= {f"BIND_{name}": i for i, name in enumerate([*reads, "Y"])}
    dims = {
        "M": m,
        "N": n,
        "K": k,
        "K4": ceil_div(k, 4),
        "BATCH_DIMS": batch,
        "A_BATCH_STRIDES": a_strides,
        "B_BATCH_STRIDES": b_strides,
    }
    defs["BATCH_RANK"] = len(batch)
    shader = ctx.compile_shader(ctx.node.op_type, load_wgsl(__package__, "matmul_integer.wgsl"), defs, dims)
    groups = (ceil_div(n, 4 * _WG), m, dims_product(batch))
    ctx.dispatch(shader, list(reads.values()), [ctx.output(0)], groups)


INTEGER_MATMUL: dict[str, IntegerMatMulOp] = named_rows({"MatMulInteger": IntegerMatMulOp(a_zp=2, b_zp=3)})
INTEGER_MATMUL_MS: dict[str, IntegerMatMulOp] = named_rows(  # com.microsoft
    {"MatMulIntegerToFloat": IntegerMatMulOp(a_zp=4, b_zp=5, scales=2, bias=6)}
)
