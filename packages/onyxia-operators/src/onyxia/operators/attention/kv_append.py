"""com.onyxia KvAppend: plain-attention KV caches grown by one step's rows, in one dispatch.

``KvAppend(past_0, new_0[, past_1, new_1]; new_layouts) -> present_0[, present_1]`` is, per pair p,
``Concat(past_p, new_p', axis=2)`` with past and present [B, KV, T, H] and ``new_p'`` the new rows as
[B, KV, S, H]: `new_p` itself when ``new_layouts[p]`` is "BNSH" (the default), or `new_p` read as
[B, S, KV, H] with "BSNH" (the projection's own layout, so optimum's ``Transpose(Reshape(v_proj(x)),
[0, 2, 1, 3])`` in front of the cache Concat is never stored). The pairs (a layer's key and value)
share B, KV, P, S and H, and one dispatch appends to both. `FuseKvCache` makes it
(`attention.kv_fusions`): each Concat, then a layer's two appends merged.

Two plans, as GroupQueryAttention's cache writer (`gqa_cache`) has:
- copying: the dispatch writes every present row, the past rows from past and the new ones from new
  (Concat would take one dispatch per input);
- in place (the LLM session aliased each present to its past, `AliasKvCache`, which needs B = KV = 1 so
  that the cache grows at its end in memory): the pasts are not bound and only the new rows are written
  after the past ones, so a decode step costs one row per cache instead of a copy of it;
- resident (the session stores the pasts in `onyxia.core.resident_kv`'s layout, [slots, KV, capacity, H],
  presents aliased to them): any B and KV; batch row b's new rows go to rows ``rows[b, 1] + s`` of slot
  ``rows[b, 0]`` (its own cached length, not the run's shared P), only those rows are written, and a batch
  row whose rows pass the capacity, or whose slot lies past the buffer, is reported in the node's error
  slot and not written, instead of landing in another sequence's rows.
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
from onyxia.core.plan_ctx import ResidentKv
from onyxia.core.resident_kv import KV_ROWS
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.attention.gqa_cache import binding_defs
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["KV_APPEND", "KvAppendOp", "LAYOUTS"]

_SOURCE = load_wgsl(__package__, "kv_append.wgsl")
LAYOUTS = ("BNSH", "BSNH")  # new_layouts values: new is [B, KV, S, H] or [B, S, KV, H]


@dataclass(frozen=True)
class _Geometry:
    batch: SymbolicDim
    heads: SymbolicDim
    past: SymbolicDim
    seq: SymbolicDim
    head_size: SymbolicDim
    layouts: tuple[str, ...]  # one per pair


def _geometry(ctx: NodeCtx) -> _Geometry:
    """Pairs of past [B, KV, P, H] and new [B, KV, S, H] (or [B, S, KV, H]), all of one dtype and the same
    dims: every fact the kernel relies on."""
    if ctx.num_inputs not in (2, 4) or not all(ctx.has_input(i) for i in range(ctx.num_inputs)):
        raise ctx.error(f"has {ctx.num_inputs} inputs; expected (past, new) pairs, one or two")
    pairs = ctx.num_inputs // 2
    layouts = tuple(str(v.decode() if isinstance(v, bytes) else v) for v in ctx.attr("new_layouts", ["BNSH"] * pairs))
    if len(layouts) != pairs or any(layout not in LAYOUTS for layout in layouts):
        raise ctx.error(f"has new_layouts {list(layouts)}; expected {pairs} of {', '.join(LAYOUTS)}")
    for i in range(ctx.num_inputs):
        if isinstance(ctx.input_shape(i), Absent) or ctx.input_rank(i) != 4 or ctx.input_dtype(i) != ctx.input_dtype(0):
            raise ctx.error(f"input {i} must be a 4-D {ctx.input_dtype(0).short} tensor with an inferred shape")
    dims = list(ctx.input_dims(0))
    for p, layout in enumerate(layouts):
        _agree(ctx, dims, list(ctx.input_dims(2 * p)), f"input {2 * p} (past)", seq=False)
        nb, *mid, nh = ctx.input_dims(2 * p + 1)
        seq, heads = (mid[1], mid[0]) if layout == "BNSH" else (mid[0], mid[1])
        new = [nb, heads, seq, nh]
        if p == 0:
            dims.append(seq)
        _agree(ctx, dims, new, f"input {2 * p + 1} (new, {layout})", seq=True)
    return _Geometry(dims[0], dims[1], dims[2], dims[4], dims[3], layouts)


def _agree(ctx: NodeCtx, dims: list[SymbolicDim], found: list[SymbolicDim], role: str, seq: bool) -> None:
    """`found` ([B, KV, P or S, H]) against the first pair's `dims` ([B, KV, P, H, S])."""
    expected = [dims[0], dims[1], dims[4] if seq else dims[2], dims[3]]
    for axis, (a, b) in zip(("batch", "kv heads", "rows", "head size"), zip(expected, found)):
        if a != b and isinstance(a, int) and isinstance(b, int):
            raise ctx.error(f"{role} has {axis} {b}; expected {a} (the pairs share B, KV, P, S and H)")
        if a != b:
            ctx.constraints.append((a, b, f"node '{ctx.node.name}' (KvAppend) {role} {axis}"))


@dataclass(frozen=True)
class KvAppendOp:
    name: str = "KvAppend"
    appends_in_place: ClassVar[bool] = True  # with each present aliased to its past, plan() writes only new rows

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        g = _geometry(ctx)
        total = SymbolicExpr.binary("+", g.past, g.seq)
        present = TensorType(ctx.input_dtype(0), shape_of([g.batch, g.heads, total, g.head_size]))
        return [present] * len(g.layouts)

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None:
            return None
        layouts = _geometry(ctx).layouts
        news = [v.transpose(0, 2, 1, 3) if layout == "BSNH" else v for v, layout in zip(values[1::2], layouts)]
        return [np.concatenate([past, new], axis=2) for past, new in zip(values[::2], news)]

    def plan(self, ctx: PlanCtx) -> None:
        g = _geometry(ctx)
        require_dtype(ctx, ctx.input_dtype(0), ALL_GPU)
        pairs = range(len(g.layouts))
        aliased = [ctx.shares_storage(2 * p, p) for p in pairs]
        if any(aliased) and not all(aliased):
            raise PlanningError(f"node '{ctx.node.name}' (KvAppend): only some presents alias their past")
        resident = [ctx.resident_kv(2 * p) for p in pairs]
        if any(r is not None for r in resident):
            _plan_resident(ctx, g, resident, all(aliased))
            return
        in_place = all(aliased)
        if in_place and not (g.batch == 1 and g.heads == 1):
            raise PlanningError(
                f"node '{ctx.node.name}' (KvAppend): present aliases past, but with batch {g.batch} and "
                f"{g.heads} kv heads the cache does not grow at its end in memory; expected both 1"
            )
        total = SymbolicExpr.binary("+", g.past, g.seq)
        n = dims_product([g.batch, g.heads, g.seq if in_place else total, g.head_size])  # per pair
        if n == 0:
            return
        reads = [ctx.input(2 * p + k) for p in pairs for k in ((1,) if in_place else (1, 0))]
        names = [name for p in pairs for name in ([f"NEW{p}"] if in_place else [f"NEW{p}", f"PAST{p}"])]
        defs = _defs(ctx, g) | binding_defs([*names, *(f"PRESENT{p}" for p in pairs)])
        if not in_place:
            defs["COPY_PAST"] = True
        sizes = {"N": n, "HEADS": g.heads, "HEAD_SIZE": g.head_size, "SEQ": g.seq, "PAST_ROWS": g.past}
        sizes["TOTAL_ROWS"] = total
        shader = ctx.compile_shader("attention/kv_append", _SOURCE, defs, sizes)
        ctx.dispatch(shader, reads, [ctx.output(p) for p in pairs], ceil_div(n, WORKGROUP_SIZE))


def _defs(ctx: PlanCtx, g: _Geometry) -> dict[str, object]:
    pairs = range(len(g.layouts))
    defs = {**type_defs(T=ctx.input_dtype(0)), "WORKGROUP_SIZE": WORKGROUP_SIZE, "PAIRS": " ".join(map(str, pairs))}
    return defs | {f"NEW_BSNH{p}": True for p in pairs if g.layouts[p] == "BSNH"}


def _plan_resident(ctx: PlanCtx, g: _Geometry, resident: list[ResidentKv | None], aliased: bool) -> None:
    """Only the new rows, each batch row's at its own cached length in its own slot (module docstring)."""
    if not aliased or any(r is None for r in resident):
        raise PlanningError(
            f"node '{ctx.node.name}' (KvAppend): a past in the session's resident KV layout needs every past "
            "of the node resident and every present aliased to its past (only the new rows are written)"
        )
    first = resident[0]
    assert first is not None
    n = dims_product([g.batch, g.heads, g.seq, g.head_size])  # per pair
    if n == 0:
        return
    pairs = range(len(g.layouts))
    errors = ctx.error_slot(
        f"{KV_ROWS}: each batch row's slot (kv_rows[b, 0]) must be one the cache buffer holds and its cached "
        f"rows (kv_rows[b, 1]) plus the {g.seq} new rows at most the capacity {first.capacity}"
    )
    names = [*(f"NEW{p}" for p in pairs), "ROWS", *(f"PRESENT{p}" for p in pairs)]
    defs = _defs(ctx, g) | binding_defs(names) | {"RESIDENT": True, "ERRORS_BINDING": len(names)}
    sizes = {"N": n, "HEADS": g.heads, "HEAD_SIZE": g.head_size, "SEQ": g.seq, "CAPACITY": first.capacity}
    shader = ctx.compile_shader("attention/kv_append", _SOURCE, defs, sizes, errors.immediates)
    reads = [*(ctx.input(2 * p + 1) for p in pairs), first.rows]
    writes = [*(ctx.output(p) for p in pairs), errors.ref]
    ctx.dispatch(shader, reads, writes, ceil_div(n, WORKGROUP_SIZE))


KV_APPEND: dict[str, KvAppendOp] = {"KvAppend": KvAppendOp()}
