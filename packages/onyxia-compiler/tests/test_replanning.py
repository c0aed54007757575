"""`GraphReplanner`: every compiled plan can be planned again at other values of its compiled dims,
from the graph and settings of its first compile, leaving the caller's graph as it was."""

from __future__ import annotations

import numpy as np
import pytest

from onyxia.compiler import CompilerPipeline
from onyxia.core import CompiledModel, DataType, GraphBuilder, InputError, IrGraph, SymbolicExpr
from onyxia.core.settings import override
from onyxia.operators import core_operator_registry


def _graph() -> IrGraph:
    """x[n, k] -> Relu, three views, a Tile to [n*k, 8] reduced back by ReduceMax, then Exp, Neg,
    Sigmoid: intermediates of several sizes, so buffer sharing groups some of them."""
    b = GraphBuilder("replan")
    x = b.input("x", DataType.FLOAT, ["n", "k"])
    view = b.op("Flatten", b.op("Unsqueeze", b.op("Relu", x), b.initializer("axes", np.array([0], np.int64))))
    wide = b.op(
        "Tile",
        b.op("Reshape", view, b.initializer("col", np.array([-1, 1], np.int64))),
        b.initializer("reps", np.array([1, 8], np.int64)),
    )
    narrow = b.op("ReduceMax", wide, b.initializer("ax", np.array([1], np.int64)), keepdims=0)
    b.output(b.op("Sigmoid", b.op("Neg", b.op("Exp", narrow))))
    return b.graph


def _input_dims(plan: CompiledModel) -> tuple[object, ...]:
    return tuple(plan.tensors[plan.inputs[0]].dims)


def test_a_compiled_plan_replans_at_new_dims_from_the_untouched_graph() -> None:
    graph = _graph()
    before = str(graph)
    plan = CompilerPipeline(core_operator_registry()).compile(graph, {"k": 4})
    assert plan.replanner is not None
    n, k = (SymbolicExpr.parse(name) for name in ("n", "k"))
    assert plan.replanner.input_dims == {"x": (n, k)}  # as declared, so the runtime maps axes to dims
    assert plan.dims == {"k": 4} and _input_dims(plan) == (n, 4)
    again = plan.replanner.replan({"k": 9})
    assert again.dims == {"k": 9} and _input_dims(again) == (n, 9) and again.replanner is not None
    assert str(graph) == before  # the replanner compiles a copy, as every compile does
    wider = plan.replanner.replan({"k": 9, "n": 2})  # an added dim compiles static (a broken assumption's dims)
    assert wider.dims == {"k": 9, "n": 2} and _input_dims(wider) == (2, 9)
    with pytest.raises(InputError, match=r"re-plan of 'replan'.*\['n'\] given; expected at least.*\['k'\]"):
        plan.replanner.replan({"n": 2})  # 'k' would turn symbolic: not a change of compiled dims


def test_a_replan_compiles_under_the_settings_of_the_first_compile() -> None:
    """An LLM session compiles inside a device-limits `override` that has ended when a dim changes."""
    pipeline = CompilerPipeline(core_operator_registry())
    assert pipeline.compile(_graph(), {"k": 4}).buffer_groups  # sharing is on by default
    with override(share_buffers=False):
        plan = pipeline.compile(_graph(), {"k": 4})
    assert plan.replanner is not None and not plan.buffer_groups
    assert not plan.replanner.replan({"k": 5}).buffer_groups
