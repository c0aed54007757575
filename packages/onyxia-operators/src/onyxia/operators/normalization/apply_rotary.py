"""com.onyxia ApplyRotaryPosEmb: Hugging Face's ``apply_rotary_pos_emb`` with explicit cos and sin tensors.

``ApplyRotaryPosEmb(x, cos, sin[, scale]; rotary_dim, transpose_input, epsilon)`` is, per head,
``y[:R] = x[:R] * cos + rotate_half(x[:R]) * sin`` (``rotate_half(a) = concat(-a[R/2:], a[:R/2])``) and
``y[R:] = x[R:]``, R being ``rotary_dim`` (0: the whole head). optimum's exports spell it with plain ops
(Slice, Neg, Concat, Mul, Add); the `FuseRotateHalf` rules make this one dispatch of it. Unlike
com.microsoft RotaryEmbedding it takes no positions and no cache: cos and sin are the graph's own tensors,
read at every element exactly as the graph multiplies them (numpy broadcasting against the rotated
[B, N, S, R] output part), so nothing assumes the two halves of a cos row are equal or positions contiguous.

- x is [B, N, S, H]; with ``transpose_input=1`` it is [B, S, N, H] (the exporter's Reshape of a projection)
  and the op reads it through the ``Transpose(perm=[0, 2, 1, 3])`` it replaces. The output is [B, N, S, H].
- With `scale` ([H]), each head is first RMS-normalised as SimplifiedLayerNormalization over the last axis
  does (float32 statistics, ``epsilon``) and the result rounded to x's dtype before the rotation: Qwen 3 /
  Gemma 3 q_norm and k_norm in the same dispatch.
- The rotation computes in float32 and rounds once to the output dtype (a float16 graph rounding after each
  Mul and the Add would differ in the last bit: the fusion rules decline float16).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicDim, TensorType, load_wgsl
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.layout import node_literal, type_defs
from onyxia.operators.normalization.checks import require_equal_dim
from onyxia.operators.normalization.layer_norm import normalize_rows, row_lanes
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["APPLY_ROTARY", "ApplyRotaryPosEmbOp", "apply_rotary_numpy"]

_SOURCE = load_wgsl(__package__, "apply_rotary.wgsl")
_SCALE = 3
_DEFAULT_EPSILON = 1e-5  # SimplifiedLayerNormalization's


class _Geometry(NamedTuple):
    out: tuple[SymbolicDim, ...]  # [B, N, S, H]
    rotary: int
    cos_strides: tuple[SymbolicDim, ...]  # element strides of cos over the output's [B, N, S, R] index
    sin_strides: tuple[SymbolicDim, ...]


@dataclass(frozen=True)
class ApplyRotaryPosEmbOp:
    name: str = "ApplyRotaryPosEmb"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        geo = _geometry(ctx)
        return [TensorType(ctx.input_dtype(0), shape_of(geo.out))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None or any(v.dtype == object for v in values):
            return None
        geo = _geometry(ctx)
        x, cos, sin = values[:3]
        scale = values[_SCALE] if len(values) > _SCALE else None
        transposed = _transposed(ctx)
        y = apply_rotary_numpy(x, cos, sin, scale, geo.rotary, transposed, _epsilon(ctx), ctx.output_numpy_dtype(0))
        return [y]

    def plan(self, ctx: PlanCtx) -> None:
        geo = _geometry(ctx)
        roles = ((0, "x"), (1, "cos"), (2, "sin"), (_SCALE, "scale"))[: ctx.num_inputs]
        for i, role in roles:
            require_dtype(ctx, ctx.input_dtype(i), FLOATS, f"input {i} ({role})")
        batch, heads, seq, head = geo.out
        rows = dims_product((batch, heads, seq))
        if dims_product(geo.out) == 0:
            return  # an empty output: nothing to write
        norm = ctx.num_inputs > _SCALE
        out_dtype = ctx.output_tensor(0).dtype
        types = {"X_T": ctx.input_dtype(0), "COS_T": ctx.input_dtype(1), "SIN_T": ctx.input_dtype(2), "Y_T": out_dtype}
        if norm:
            types["SCALE_T"] = ctx.input_dtype(_SCALE)
        defs: dict[str, object] = {**type_defs(**types), **row_lanes(head)}
        if norm:
            defs["NORM"] = True
            defs["EPSILON"] = node_literal(ctx, DataType.FLOAT, _epsilon(ctx), "attribute 'epsilon'")
            if out_dtype == DataType.FLOAT16:
                defs["Y_F16"] = True
        if _transposed(ctx):
            defs["TRANSPOSE_INPUT"] = True
        defs["B_Y"] = ctx.num_inputs
        dims: dict[str, SymbolicDim] = {"ROWS": rows, "HEADS": heads, "S": seq, "HEAD": head, "ROTARY": geo.rotary}
        for prefix, strides in (("COS", geo.cos_strides), ("SIN", geo.sin_strides)):
            dims.update({f"{prefix}_{axis}": stride for axis, stride in zip("BNSD", strides)})
        shader = ctx.compile_shader("normalization/apply_rotary", _SOURCE, defs, dims)
        ctx.dispatch(shader, [ctx.input(i) for i in range(ctx.num_inputs)], [ctx.output(0)], rows)


def _transposed(ctx: NodeCtx) -> bool:
    return ctx.attr_int("transpose_input", 0) == 1


def _epsilon(ctx: NodeCtx) -> float:
    return float(np.float32(ctx.attr_float("epsilon", _DEFAULT_EPSILON)))


def _geometry(ctx: NodeCtx) -> _Geometry:
    """Output dims, rotary dim and the cos/sin strides, validated."""
    if ctx.num_inputs not in (3, 4) or not all(ctx.has_input(i) for i in range(ctx.num_inputs)):
        raise ctx.error("expected inputs (x, cos, sin) or (x, cos, sin, scale)")
    dims = ctx.input_dims(0)
    layout = "[B, S, N, H]" if _transposed(ctx) else "[B, N, S, H]"
    if len(dims) != 4 or not isinstance(dims[3], int):
        raise ctx.error(f"input 0 (x) has shape {ctx.input_shape(0)}; expected {layout} with a static head size")
    if ctx.attr_int("transpose_input", 0) not in (0, 1):
        raise ctx.error(f"attribute transpose_input={ctx.attr_int('transpose_input')}; expected 0 or 1")
    out = (dims[0], dims[2], dims[1], dims[3]) if _transposed(ctx) else tuple(dims)
    head = dims[3]
    rotary = ctx.attr_int("rotary_dim", 0) or head
    if rotary % 2 or not 0 < rotary <= head:
        raise ctx.error(f"attribute rotary_dim={rotary}; expected an even number in (0, head size {head}]")
    if ctx.num_inputs > _SCALE and dims_product(ctx.input_dims(_SCALE)) != head:
        raise ctx.error(f"input 3 (scale) has shape {ctx.input_shape(_SCALE)}; expected {head} elements (one head)")
    target = (*out[:3], rotary)
    return _Geometry(out, rotary, _strides(ctx, 1, "cos", target), _strides(ctx, 2, "sin", target))


def _strides(ctx: NodeCtx, i: int, role: str, target: Sequence[SymbolicDim]) -> tuple[SymbolicDim, ...]:
    """Element strides of input `i` over the 4-D `target` index; 0 along dims it broadcasts (static 1s).
    It must broadcast to `target` without growing it, as the graph's Mul did against the rotated part."""
    given = ctx.input_dims(i)
    if len(given) > 4:
        raise ctx.error(f"input {i} ({role}) has shape {ctx.input_shape(i)}; expected at most 4 dims")
    dims: list[SymbolicDim] = [*([1] * (4 - len(given))), *given]
    strides: list[SymbolicDim] = []
    step: SymbolicDim = 1
    for d, t in zip(reversed(dims), reversed(target)):
        if d == 1:
            strides.append(0)
            continue
        if not require_equal_dim(ctx, d, t, f"input {i} ({role})"):
            raise ctx.error(
                f"input {i} ({role}) has shape {ctx.input_shape(i)}; expected it to broadcast to "
                f"{shape_of(target)} (the rotated part of the output) without growing it"
            )
        strides.append(step)
        step = dims_product((step, d))
    return tuple(reversed(strides))


def apply_rotary_numpy(
    x: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    scale: np.ndarray | None,
    rotary: int,
    transposed: bool,
    epsilon: float,
    out_dtype: np.dtype,
) -> np.ndarray:
    """The op in numpy (float32), for folding and as the tests' reference."""
    work = x.transpose(0, 2, 1, 3) if transposed else x
    work = work.astype(np.float32)
    if scale is not None:
        normed = normalize_rows({"x": work, "scale": scale.reshape(-1)}, 3, epsilon, rms=True)["y"]
        work = normed.astype(x.dtype).astype(np.float32)  # the norm's output is stored in x's dtype
    part = work[..., :rotary]
    half = rotary // 2
    rotated = np.concatenate([-part[..., half:], part[..., :half]], axis=-1)
    out = work.copy()
    out[..., :rotary] = part * cos.astype(np.float32) + rotated * sin.astype(np.float32)
    return out.astype(out_dtype)


APPLY_ROTARY: dict[str, ApplyRotaryPosEmbOp] = {"ApplyRotaryPosEmb": ApplyRotaryPosEmbOp()}
