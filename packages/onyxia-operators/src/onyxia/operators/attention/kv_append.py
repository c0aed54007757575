"""com.onyxia KvAppend: a plain-attention KV cache grown by one step's rows, in one dispatch.

``KvAppend(past, new; new_layout) -> present`` is ``Concat(past, new', axis=2)`` with past and present
[B, KV, T, H] and ``new'`` the new rows as [B, KV, S, H]: `new` itself with ``new_layout="BNSH"``
(default), or `new` read as [B, S, KV, H] with ``"BSNH"`` (the projection's own layout, so optimum's
``Transpose(Reshape(v_proj(x)), [0, 2, 1, 3])`` in front of the cache Concat is never stored). The
`FuseKvCache` pass makes it from that Concat (`attention.kv_fusions`).

Two plans, as GroupQueryAttention's cache writer (`gqa_cache`) has:
- copying: one dispatch writes every present row, the past rows from past and the new ones from new
  (Concat would take one dispatch per input);
- in place (the LLM session aliased present to past, `AliasKvCache`, which needs B = KV = 1 so that the
  cache grows at its end in memory): the dispatch binds only new and present and writes the new rows
  after the past ones, so a decode step costs one row instead of a copy of the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from onyxia.core import (
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    PlanningError,
    SymbolicDim,
    SymbolicExpr,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["KV_APPEND", "KvAppendOp", "LAYOUTS"]

_SOURCE = load_wgsl(__package__, "kv_append.wgsl")
LAYOUTS = ("BNSH", "BSNH")  # new_layout values: new is [B, KV, S, H] or [B, S, KV, H]


@dataclass(frozen=True)
class _Geometry:
    batch: SymbolicDim
    heads: SymbolicDim
    past: SymbolicDim
    seq: SymbolicDim
    head_size: SymbolicDim
    layout: str


def _geometry(ctx: NodeCtx) -> _Geometry:
    """past [B, KV, P, H] and new [B, KV, S, H] (or [B, S, KV, H]), of one dtype; every fact the kernel relies on."""
    layout = ctx.attr_str("new_layout", "BNSH")
    if layout not in LAYOUTS:
        raise ctx.error(f"has new_layout '{layout}'; expected one of {', '.join(LAYOUTS)}")
    for i, role in ((0, "past"), (1, "new")):
        if not ctx.has_input(i) or isinstance(ctx.input_shape(i), Absent) or ctx.input_rank(i) != 4:
            raise ctx.error(f"input {i} ({role}) must be a 4-D tensor with an inferred shape")
    if ctx.input_dtype(1) != ctx.input_dtype(0):
        raise ctx.error(f"input 1 (new) is {ctx.input_dtype(1).short}; expected {ctx.input_dtype(0).short} like past")
    batch, heads, past, head_size = ctx.input_dims(0)
    nb, *mid, nh = ctx.input_dims(1)
    seq, nkv = (mid[1], mid[0]) if layout == "BNSH" else (mid[0], mid[1])
    for axis, (a, b) in {"batch": (batch, nb), "kv heads": (heads, nkv), "head size": (head_size, nh)}.items():
        if a != b and isinstance(a, int) and isinstance(b, int):
            raise ctx.error(f"past has {axis} {a} but new ({layout}) has {b}")
        if a != b:
            ctx.constraints.append((a, b, f"node '{ctx.node.name}' (KvAppend) {axis}"))
    return _Geometry(batch, heads, past, seq, head_size, layout)


@dataclass(frozen=True)
class KvAppendOp:
    name: str = "KvAppend"
    appends_in_place: ClassVar[bool] = True  # with present aliased to past, plan() writes only the new rows

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        g = _geometry(ctx)
        total = SymbolicExpr.binary("+", g.past, g.seq)
        return [TensorType(ctx.input_dtype(0), shape_of([g.batch, g.heads, total, g.head_size]))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None:
            return None
        past, new = values
        if _geometry(ctx).layout == "BSNH":
            new = new.transpose(0, 2, 1, 3)
        return [np.concatenate([past, new], axis=2)]

    def plan(self, ctx: PlanCtx) -> None:
        g = _geometry(ctx)
        require_dtype(ctx, ctx.input_dtype(0), ALL_GPU)
        in_place = ctx.shares_storage(0, 0)
        if in_place and not (g.batch == 1 and g.heads == 1):
            raise PlanningError(
                f"node '{ctx.node.name}' (KvAppend): present aliases past, but with batch {g.batch} and "
                f"{g.heads} kv heads the cache does not grow at its end in memory; expected both 1"
            )
        total = SymbolicExpr.binary("+", g.past, g.seq)
        rows = g.seq if in_place else total  # rows written per (batch, kv head)
        n = dims_product([g.batch, g.heads, rows, g.head_size])
        if n == 0:
            return
        defs = {**type_defs(T=ctx.input_dtype(0)), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        if g.layout == "BSNH":
            defs["NEW_BSNH"] = True
        if not in_place:
            defs["COPY_PAST"] = True
        sizes = {"N": n, "HEADS": g.heads, "HEAD_SIZE": g.head_size, "SEQ": g.seq, "PAST_ROWS": g.past}
        sizes["TOTAL_ROWS"] = total
        shader = ctx.compile_shader("attention/kv_append", _SOURCE, defs, sizes)
        reads = [ctx.input(1)] if in_place else [ctx.input(1), ctx.input(0)]
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))


KV_APPEND: dict[str, KvAppendOp] = {"KvAppend": KvAppendOp()}
