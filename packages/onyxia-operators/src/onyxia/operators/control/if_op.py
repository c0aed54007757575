"""`If`: both branches compiled into plans of their own; the run takes the one its condition picks.

A condition known at compile time compiles only its branch (the step still runs it as a subplan, with
no read-back). Otherwise the runtime reads the condition's one word back after the steps before it,
runs the chosen branch on the GPU with its inputs copied from the outer buffers, and copies the
results out (`onyxia.core.plan`). Outputs keep their dims where both branches agree in the
node's own dims, else get a symbol bound from the chosen branch's result (a branch that returns an
empty tensor against one that returns NMS's selection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import FoldCtx, InferenceCtx, NodeCtx, OperatorBase, PlanCtx, TensorType, shape_of
from onyxia.core.plan import RunSubplan
from onyxia.operators.control.subplans import (
    Subplan,
    bound_symbols,
    captured_bindings,
    compile_subgraph,
    known_names,
    node_buffers,
    outer_dims,
    output_buffers,
    result_dims,
)

__all__ = ["IfOp"]

_BRANCHES = ("then_branch", "else_branch")


@dataclass(frozen=True)
class IfOp(OperatorBase):
    name: str = "If"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        branches = _branches(ctx)
        known = known_names(ctx)
        types = []
        for k in range(ctx.num_outputs):
            results = [result_dims(b.plan, k) for b in branches.values()]
            dtypes = {dtype for dtype, _ in results}
            if len(dtypes) != 1:
                raise ctx.error(
                    f"output {k} is {sorted(d.name for d in dtypes)} in the two branches; expected one dtype"
                )
            dims = outer_dims(ctx, k, [dims for _, dims in results], known)
            types.append(TensorType(dtypes.pop(), shape_of(dims)))
        return types

    def try_fold(self, ctx: FoldCtx) -> None:
        return None

    def plan(self, ctx: PlanCtx) -> None:
        branches = _branches(ctx)
        chosen = _known_condition(ctx)
        plans = tuple(branches[0 if chosen is None else chosen] if i not in branches else branches[i] for i in (0, 1))
        needed = {i for b in plans for i, _ in b.feeds} | ({0} if chosen is None else set())
        refs, dims = node_buffers(ctx, needed)
        outs, out_dims = output_buffers(ctx)
        names = tuple(tuple(b.plan.tensors[t].name for t in b.plan.outputs) for b in plans)
        ctx.op.steps.append(
            RunSubplan(
                kind="If",
                node=ctx.node.name,
                plans=tuple(b.plan for b in plans),
                inputs=refs,
                input_dims=dims,
                feeds=tuple(b.feeds for b in plans),
                outputs=outs,
                output_dims=out_dims,
                results=names,
                symbols=bound_symbols(out_dims),
                condition=None if chosen is None else 1 - chosen,  # 1: plans[0] (then) runs
            )
        )


def _known_condition(ctx: NodeCtx) -> int | None:
    """0 (then) or 1 (else) when the condition is a compile-time number, else None."""
    value = ctx.input_value(0)
    if value is None or value.dtype == object:
        return None
    if value.size != 1:
        raise ctx.error(f"the condition has {value.size} elements; expected one")
    return 0 if bool(np.asarray(value).reshape(-1)[0]) else 1


def _branches(ctx: NodeCtx) -> dict[int, Subplan]:
    """Branch index -> its plan; only the chosen one when the condition is known."""
    if ctx.input_dtype(0).name != "BOOL":
        raise ctx.error(f"the condition is {ctx.input_dtype(0).name.lower()}; expected bool")
    chosen = _known_condition(ctx)
    wanted = (0, 1) if chosen is None else (chosen,)
    bindings = captured_bindings(ctx)
    return {i: compile_subgraph(ctx, _BRANCHES[i], bindings) for i in wanted}
