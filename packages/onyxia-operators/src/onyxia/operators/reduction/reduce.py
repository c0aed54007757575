"""`ReductionOp`: ReduceSum, ReduceMean, ReduceMax ... one row each, one shader.

A row is the reduction's algebra: the identity (`init`, which is also what an empty reduction
yields, as ONNX specifies: 0 for sums, 1 for Prod, -inf for Max and LogSumExp), a per-element
`map`, an associative `combine` and a `final` step. ONNX moved `axes` from an attribute to input 1
(opset 13 for ReduceSum, 18 for the rest), so each op gets two rows split by opset.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicDim, TensorType, ceil_div, load_wgsl
from onyxia.core.shapes import Absent, dims_product, shape_of
from onyxia.operators.int64_checks import checked_combine, checked_defs, int64_errors
from onyxia.operators.layout import contiguous_strides, type_defs
from onyxia.operators.typesets import BOOL, FLOATS, NUMERIC, require_dtype

__all__ = ["REDUCTION_OPS", "ReductionOp", "reduce_last_axes"]

_SOURCE = load_wgsl(__package__, "reduce.wgsl")
_WORKGROUP = 64
_SERIAL_LIMIT = 8  # reductions this short run one invocation per output: a workgroup tree would idle

# identity name -> accumulator type -> WGSL literal (bitcasts: WGSL has no inf literal); bool
# accumulates in u32 0/1, so its highest value is 1u (an empty ReduceMin of bool is true)
_IDENTITY = {
    "zero": {"f32": "0.0", "i32": "0i", "u32": "0u", "bool": "0u"},
    "one": {"f32": "1.0", "i32": "1i", "u32": "1u", "bool": "1u"},
    "lowest": {"f32": "bitcast<f32>(0xff800000u)", "i32": "bitcast<i32>(0x80000000u)", "u32": "0u", "bool": "0u"},
    "highest": {"f32": "bitcast<f32>(0x7f800000u)", "i32": "2147483647i", "u32": "4294967295u", "bool": "1u"},
}


@dataclass(frozen=True)
class ReductionOp:
    init: str  # a key of _IDENTITY
    combine: str  # WGSL in `a`, `b`
    fold: Callable[[np.ndarray], np.ndarray]  # numpy, reducing the last axis
    map: str = "x"  # WGSL in `x`
    final: str = "acc"  # WGSL in `acc`, `count`
    dtypes: frozenset[DataType] = NUMERIC
    axes_input: bool = True  # axes as input 1 (newer opsets) rather than the `axes` attribute
    name: str = "reduce"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dims = ctx.input_dims(0)
        axes = self.reduced_axes(ctx)
        keep = ctx.attr_int("keepdims", 1)
        out = [1 if i in axes else d for i, d in enumerate(dims) if keep or i not in axes]
        return [TensorType(ctx.input_dtype(0), shape_of(out))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        x = ctx.input_value(0)
        if x is None or x.dtype == object:
            return None
        axes = self.reduced_axes(ctx)
        work = x.astype(np.float32) if x.dtype == np.float16 else x
        with np.errstate(all="ignore"):
            result = self.fold(reduce_last_axes(work, axes))
        return [np.asarray(result).astype(x.dtype).reshape(ctx.require_static_output(0))]

    def plan(self, ctx: PlanCtx) -> None:
        x, y = ctx.input_tensor(0), ctx.output_tensor(0)
        require_dtype(ctx, x.dtype, self.dtypes)
        axes = self.reduced_axes(ctx)
        (kept_dims, kept_strides), (red_dims, red_strides) = _index_spaces(ctx.input_dims(0), axes)
        n_out, n_red = dims_product(kept_dims), dims_product(red_dims)
        lanes = _lanes(n_red)
        acc = "f32" if x.dtype in FLOATS else x.dtype.wgsl
        init = _IDENTITY[self.init]["bool" if x.dtype == DataType.BOOL else acc]
        # int64/uint64 sums and products can leave the 32-bit range: every partial result is checked
        map_expr, combine = checked_combine(self.map, x.dtype), checked_combine(self.combine, x.dtype)
        errors = int64_errors(ctx, x.dtype) if (map_expr, combine) != (self.map, self.combine) else None
        defs = {
            **type_defs(X_T=x.dtype, Y_T=y.dtype),
            **checked_defs(errors, 2),
            **{"ACC_T": acc, "INIT": init, "MAP": map_expr, "COMBINE": combine},
            **{"FINAL": self.final, "WORKGROUP_SIZE": _WORKGROUP, "LANES": lanes},
            **{"KEPT_RANK": len(kept_dims), "RED_RANK": len(red_dims)},
        }
        dims = {"N_OUT": n_out, "N_RED": n_red, "KEPT_DIMS": kept_dims, "KEPT_STRIDES": kept_strides}
        dims.update(RED_DIMS=red_dims, RED_STRIDES=red_strides)
        shader = ctx.compile_shader(
            "reduction/reduce", _SOURCE, defs, dims, None if errors is None else errors.immediates
        )
        writes = [ctx.output(0)] if errors is None else [ctx.output(0), errors.ref]
        ctx.dispatch(shader, [ctx.input(0)], writes, ceil_div(n_out, _WORKGROUP // lanes))

    def reduced_axes(self, ctx: NodeCtx) -> list[int]:
        """Sorted non-negative axes to reduce. With noop_with_empty_axes and no axes that is none at
        all: every element is its own reduction, so the row's map and final still apply (ReduceL1
        gives |x|, as onnxruntime and the reference do)."""
        rank = ctx.input_rank(0)
        if self.axes_input:
            value = _axes_vector(ctx) if ctx.has_input(1) else np.zeros(0, np.int64)
            axes, noop = [int(a) for a in value.reshape(-1)], ctx.attr_int("noop_with_empty_axes", 0)
        else:
            axes, noop = ctx.attr_ints("axes", []), 0
        if not axes:
            return [] if noop else list(range(rank))
        return sorted(ctx.normalize_axes(axes, rank))


def _axes_vector(ctx: NodeCtx) -> np.ndarray:
    """Input 1's value, refused unless 1-D as onnxruntime refuses it (its reshape(-1) would hide a
    [[1]] that onnxruntime answers with "An axes tensor must be a vector tensor")."""
    shape = ctx.input_shape(1)
    value = ctx.input_value(1)
    rank = value.ndim if value is not None else None if isinstance(shape, Absent) else len(shape.dims)
    if rank is not None and rank != 1:
        found = f"shape {list(value.shape)}" if value is not None else f"rank {rank}"
        raise ctx.error(
            f"input 1 (axes) has {found}; expected 1-D (onnxruntime: 'An axes tensor must be a vector tensor')"
        )
    return ctx.require_value(1, "axes")


def reduce_last_axes(x: np.ndarray, axes: list[int]) -> np.ndarray:
    """`x` with `axes` moved to the end and flattened into one (so any fold reduces axis -1)."""
    kept = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, kept + list(axes))
    return moved.reshape(*[x.shape[a] for a in kept], int(np.prod([x.shape[a] for a in axes], dtype=np.int64)))


def _index_spaces(dims: tuple[SymbolicDim, ...], axes: list[int]) -> tuple[tuple[list, list], tuple[list, list]]:
    """(dims, strides) of the kept and reduced index spaces; adjacent axes of one kind are merged
    (they are contiguous in each other) and size-1 axes dropped, so the shader's loops stay short."""
    groups: list[list] = []  # [reduced?, dim, stride]
    for axis, (d, s) in enumerate(zip(dims, contiguous_strides(dims))):
        if d == 1:
            continue
        reduced = axis in axes
        if groups and groups[-1][0] == reduced:
            groups[-1][1:] = [groups[-1][1] * d, s]
        else:
            groups.append([reduced, d, s])
    spaces = []
    for kind in (False, True):
        chosen = [(d, s) for r, d, s in groups if r == kind] or [(1, 0)]
        spaces.append(([d for d, _ in chosen], [s for _, s in chosen]))
    return spaces[0], spaces[1]


def _lanes(n_red: SymbolicDim) -> int:
    if isinstance(n_red, int) and n_red <= _SERIAL_LIMIT:
        return 1
    if isinstance(n_red, int):
        return min(_WORKGROUP, 1 << (n_red - 1).bit_length())
    return _WORKGROUP


def _lowest(x: np.ndarray) -> float | int | bool:
    if x.dtype == np.bool_:
        return False
    return -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min


def _highest(x: np.ndarray) -> float | int | bool:
    if x.dtype == np.bool_:
        return True
    return np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).max


def _rows(name: str, row: ReductionOp, since: int) -> dict[tuple[str, int, int | None], ReductionOp]:
    """The attribute-axes row for opsets before `since` and the input-axes row from `since` on."""
    return {
        (name, 1, since - 1): dataclasses.replace(row, name=name, axes_input=False),
        (name, since, None): dataclasses.replace(row, name=name, axes_input=True),
    }


def _mean(x: np.ndarray) -> np.ndarray:
    """numpy's mean, 0 where nothing is reduced (as the shader and onnxruntime give)."""
    return np.mean(x, -1) if x.shape[-1] else np.zeros(x.shape[:-1], x.dtype)


_ORDERED = NUMERIC | BOOL
_LSE = "select(max(a, b) + log(1.0 + exp(-abs(a - b))), max(a, b), min(a, b) == bitcast<f32>(0xff800000u))"

REDUCTION_OPS: dict[tuple[str, int, int | None], ReductionOp] = {
    **_rows("ReduceSum", ReductionOp("zero", "a + b", lambda x: np.sum(x, -1)), 13),
    # an empty mean is 0 in onnxruntime (the spec leaves it undefined); 0 / 0 is NaN on a GPU, so the empty
    # case returns `acc`, the identity 0, rather than leaving it to the adapter's division
    **_rows("ReduceMean", ReductionOp("zero", "a + b", _mean, final="select(acc / count, acc, count == 0)"), 18),
    # bool since opset 20: max is any, min is all, on the 0/1 words
    **_rows(
        "ReduceMax",
        ReductionOp("lowest", "max(a, b)", lambda x: np.max(x, -1, initial=_lowest(x)), dtypes=_ORDERED),
        18,
    ),
    **_rows(
        "ReduceMin",
        ReductionOp("highest", "min(a, b)", lambda x: np.min(x, -1, initial=_highest(x)), dtypes=_ORDERED),
        18,
    ),
    **_rows("ReduceProd", ReductionOp("one", "a * b", lambda x: np.prod(x, -1)), 18),
    **_rows("ReduceSumSquare", ReductionOp("zero", "a + b", lambda x: np.sum(x * x, -1), map="x * x"), 18),
    **_rows("ReduceL1", ReductionOp("zero", "a + b", lambda x: np.sum(np.abs(x), -1), map="abs(x)"), 18),
    **_rows(
        "ReduceL2",
        ReductionOp(
            "zero", "a + b", lambda x: np.sqrt(np.sum(x * x, -1)), map="x * x", final="sqrt(acc)", dtypes=FLOATS
        ),
        18,
    ),
    **_rows(
        "ReduceLogSum",
        ReductionOp("zero", "a + b", lambda x: np.log(np.sum(x, -1)), final="log(acc)", dtypes=FLOATS),
        18,
    ),
    # log(e^a + e^b) without overflow; -inf (the identity) needs its own case, since -inf - -inf is NaN
    **_rows(
        "ReduceLogSumExp",
        ReductionOp("lowest", _LSE, lambda x: np.logaddexp.reduce(x, axis=-1, initial=-np.inf), dtypes=FLOATS),
        18,
    ),
}
