"""ONNX QLinearMatMul and com.microsoft QGemm: 8-bit products summed exactly in int32, then requantized as
onnxruntime's MLAS requantizes them (`onyxia::requant`), or, for QGemm without y_zero_point, scaled to float.

QLinearMatMul (opset 10 and 21) is numpy.matmul over batches; QGemm is Gemm's 2-D product with transA, transB,
alpha and an int32 C added to the sum before scaling (C broadcast to [M, N]). Scales and zero points: a's per
tensor, or (QLinearMatMul, as the spec allows and onnxruntime does not) one per row, shape [..1, M, 1]; b's per
tensor or one per column ([N], or [..1, 1, N]); y's per tensor. The multiplier is onnxruntime's
``alpha * a_scale * b_scale / y_scale`` in f32; float16 scales are widened to f32 first. Every input may be
known only at run time (the ONNX backend cases feed them all); the shader is qlinear_matmul.wgsl.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, broadcast_strides, node_literal, type_defs
from onyxia.operators.quantized.qlinear_params import (
    byte_operand,
    one_element,
    range_defs,
    same_dtype,
    scale_input,
    vector_of,
)

__all__ = ["QGEMM_MS", "QLINEAR_MATMUL", "QLinearMatMulOp"]

_SOURCE = load_wgsl(__package__, "qlinear_matmul.wgsl")
A, A_SCALE, A_ZP, B, B_SCALE, B_ZP = range(6)


@dataclass(frozen=True)
class QLinearMatMulOp(OperatorBase):
    """A row: where C, y_scale and y_zero_point sit, and whether the product is Gemm's (2-D, attributes)."""

    c: int = -1
    y_scale: int = 6
    y_zp: int = 7
    gemm: bool = False
    name: str = "QLinearMatMul"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        out, _ = self._check(ctx)
        m, k, n = self._mkn(ctx)
        if k != self._k_of_b(ctx):
            raise ctx.error(f"input 3 (B) holds {self._k_of_b(ctx)} rows of the product; expected K = {k}")
        if self.gemm:
            return [TensorType(out, shape_of([m, n]))]
        a, b = _promoted(ctx)
        batch = list(ctx.broadcast(a[:-2], b[:-2]).dims)
        dims = batch + ([m] if ctx.input_rank(A) > 1 else []) + ([n] if ctx.input_rank(B) > 1 else [])
        return [TensorType(out, shape_of(dims))]

    def _mkn(self, ctx: NodeCtx) -> tuple[SymbolicDim, SymbolicDim, SymbolicDim]:
        if self.gemm:
            for i, what in ((A, "A"), (B, "B")):
                if ctx.input_rank(i) != 2:
                    raise ctx.error(f"input {i} ({what}) has rank {ctx.input_rank(i)}; QGemm multiplies 2-D matrices")
            ga, gb = ctx.input_dims(A), ctx.input_dims(B)
            m, k = (ga[1], ga[0]) if ctx.attr_int("transA", 0) else (ga[0], ga[1])
            return m, k, (gb[0] if ctx.attr_int("transB", 0) else gb[1])
        a, b = _promoted(ctx)
        return a[-2], a[-1], b[-1]

    def _modes(self, ctx: NodeCtx, m: SymbolicDim, n: SymbolicDim) -> dict[str, int]:
        """Each scale's and zero point's mode (qlinear_matmul.wgsl): per tensor, row, column, or column and batch."""
        modes = {"AS_MODE": 0, "AZ_MODE": 0, "BS_MODE": 0, "BZ_MODE": 0}
        for name, i in (("AS_MODE", A_SCALE), ("AZ_MODE", A_ZP)):
            if not self.gemm and vector_of(ctx, i, m, "", "row"):
                modes[name] = 1
        for name, i in (("BS_MODE", B_SCALE), ("BZ_MODE", B_ZP)):
            if vector_of(ctx, i, n, "", "column", self._b_batch(ctx)):
                modes[name] = 3 if any(d != 1 for d in ctx.input_dims(i)[:-2]) else 2
        return modes

    def _b_batch(self, ctx: NodeCtx) -> list[SymbolicDim]:
        return [] if self.gemm else _promoted(ctx)[1][:-2]

    def _k_of_b(self, ctx: NodeCtx) -> SymbolicDim:
        b = ctx.input_dims(B) if self.gemm else _promoted(ctx)[1]
        return b[1] if self.gemm and ctx.attr_int("transB", 0) else b[-2]

    def _check(self, ctx: NodeCtx) -> tuple[DataType, bool]:
        """The output dtype and whether it is requantized, after checking every input's dtype and form."""
        byte_operand(ctx, A, "A")
        byte_operand(ctx, B, "B")
        same_dtype(ctx, A_ZP, A, "a_zero_point")
        same_dtype(ctx, B_ZP, B, "b_zero_point")
        for i, what in ((A_SCALE, "a_scale"), (B_SCALE, "b_scale"), (self.y_scale, "y_scale")):
            if ctx.has_input(i):
                scale_input(ctx, i, what)
        for i, what in ((self.y_scale, "y_scale"), (self.y_zp, "y_zero_point")):
            one_element(ctx, i, what)
        m, _, n = self._mkn(ctx)
        for i in (A_SCALE, A_ZP):
            if self.gemm:
                one_element(ctx, i, "a_scale" if i == A_SCALE else "a_zero_point")
            else:
                vector_of(ctx, i, m, "a_scale" if i == A_SCALE else "a_zero_point", "row")
        for i in (B_SCALE, B_ZP):
            vector_of(ctx, i, n, "b_scale" if i == B_SCALE else "b_zero_point", "column", self._b_batch(ctx))
        if self.c >= 0 and ctx.has_input(self.c) and ctx.input_dtype(self.c) != DataType.INT32:
            raise ctx.error(f"input {self.c} (C) has dtype {ctx.input_dtype(self.c).name.lower()}; expected int32")
        if not ctx.has_input(self.y_zp):
            return DataType.FLOAT, False
        return byte_operand(ctx, self.y_zp, "y_zero_point"), True

    def plan(self, ctx: PlanCtx) -> None:
        out, requant = self._check(ctx)
        m, k, n = self._mkn(ctx)
        total = dims_product(ctx.output_dims(0))
        if total == 0:
            return
        scale_t = {
            f"{p}S_T": ctx.input_dtype(i)
            for p, i in (("A", A_SCALE), ("B", B_SCALE), ("Y", self.y_scale))
            if ctx.has_input(i)
        }
        defs: dict[str, object] = {
            **type_defs(A_T=ctx.input_dtype(A), B_T=ctx.input_dtype(B), Y_T=out, **scale_t),
            "WORKGROUP_SIZE": WORKGROUP_SIZE,
            "ALPHA": node_literal(ctx, DataType.FLOAT, ctx.attr_float("alpha", 1.0), "attribute 'alpha'"),
        }
        reads = {
            "A": A,
            "A_SCALE": A_SCALE,
            "AZP": A_ZP,
            "B": B,
            "B_SCALE": B_SCALE,
            "BZP": B_ZP,
            "C": self.c,
            "Y_SCALE": self.y_scale,
            "YZP": self.y_zp,
        }
        bound = {name: i for name, i in reads.items() if i >= 0 and ctx.has_input(i)}
        defs |= {f"BIND_{name}": slot for slot, name in enumerate([*bound, "Y"])}
        flags = {"AZP": "AZP", "BZP": "BZP", "C": "BIAS", "Y_SCALE": "YSCALE"}
        defs |= {flag: True for name, flag in flags.items() if name in bound}
        if requant:
            defs |= {"REQUANT": True, **range_defs(out)}
        defs |= self._modes(ctx, m, n)
        dims: dict[str, SymbolicDim | list[SymbolicDim]] = {"TOTAL": total, "M": m, "N": n, "K": k}
        dims |= self._strides(ctx, m, k, n)
        batch = dims["BATCH_DIMS"]
        defs["BATCH_RANK"] = len(batch) if isinstance(batch, list) else 1
        shader = ctx.compile_shader(ctx.node.op_type, _SOURCE, defs, dims)
        inputs = [ctx.input(i) for i in bound.values()]
        ctx.dispatch(shader, inputs, [ctx.output(0)], ceil_div(total, WORKGROUP_SIZE))

    def _strides(
        self, ctx: NodeCtx, m: SymbolicDim, k: SymbolicDim, n: SymbolicDim
    ) -> dict[str, SymbolicDim | list[SymbolicDim]]:
        """Element strides of A, B and C, and the batch dims with each operand's batch strides."""
        if self.gemm:
            a_mk = (1, m) if ctx.attr_int("transA", 0) else (k, 1)
            b_kn = (1, k) if ctx.attr_int("transB", 0) else (n, 1)
            c_mn: list[SymbolicDim] = [0, 0]
            if self.c >= 0 and ctx.has_input(self.c):
                c_mn = broadcast_strides(ctx.input_dims(self.c), [m, n])
            return {
                "A_SM": a_mk[0],
                "A_SK": a_mk[1],
                "B_SK": b_kn[0],
                "B_SN": b_kn[1],
                "C_SM": c_mn[0],
                "C_SN": c_mn[1],
                "BATCH_DIMS": [1],
                "A_BATCH_STRIDES": [0],
                "B_BATCH_STRIDES": [0],
            }
        a, b = _promoted(ctx)
        batch = list(ctx.broadcast(a[:-2], b[:-2]).dims) or [1]
        a_strides = [s * m * k for s in broadcast_strides(a[:-2] or [1], batch)]
        b_strides = [s * k * n for s in broadcast_strides(b[:-2] or [1], batch)]
        return {
            "A_SM": k,
            "A_SK": 1,
            "B_SK": n,
            "B_SN": 1,
            "C_SM": 0,
            "C_SN": 0,
            "BATCH_DIMS": batch,
            "A_BATCH_STRIDES": a_strides,
            "B_BATCH_STRIDES": b_strides,
        }


def _promoted(ctx: NodeCtx) -> tuple[list[SymbolicDim], list[SymbolicDim]]:
    """A and B as matmul reads them: a 1-D A is one row, a 1-D B one column."""
    a, b = list(ctx.input_dims(A)), list(ctx.input_dims(B))
    return ([1, *a] if len(a) == 1 else a), ([*b, 1] if len(b) == 1 else b)


QLINEAR_MATMUL: dict[str, QLinearMatMulOp] = named_rows({"QLinearMatMul": QLinearMatMulOp()})
QGEMM_MS: dict[str, QLinearMatMulOp] = named_rows(  # com.microsoft
    {"QGemm": QLinearMatMulOp(c=6, y_scale=7, y_zp=8, gemm=True)}
)
