"""An axes-less Squeeze on a symbolic dim: the dim decides the output's rank, so the plan needs it static.

ONNX (and onnxruntime) squeeze every dim that is 1 at run time: on ``x[batch, 1, 3]`` the output is
``[batch, 3]`` for a batch of 2 and ``[3]`` for a batch of 1. Shape inference cannot know which, so it
records the dim (`CompiledModel.static_required`); a plan compiled with the dim bound squeezes exactly as
onnxruntime at each value, and the runtime refuses a plan that left it open rather than answer with the
wrong rank. PLCMOS (speechmos) ends so, and its package reads the 0-d score with ``float(...)``.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracle import check_model, compile_model, runtime

from onyxia.core.errors import PlanningError

SQUEEZE_WHY = "Squeeze without axes drops the dim where it is 1 at run time"


def _squeeze_model(dims: list[int | str], axes: list[int] | None = None, opset: int = 13) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inputs, inits = ["x"], list[onnx.TensorProto]()
    if axes is not None:
        inits.append(helper.make_tensor("axes", TensorProto.INT64, [len(axes)], axes))
        inputs.append("axes")
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Squeeze", ["n", *inputs[1:]], ["y"], "sq")]
    graph = helper.make_graph(nodes, "squeeze", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def test_shape_inference_records_the_symbolic_dim_and_why() -> None:
    plan = compile_model(_squeeze_model(["batch", 1, "t"]))
    assert plan.static_required == {
        "batch": f"node 'sq' (Squeeze): {SQUEEZE_WHY}",
        "t": f"node 'sq' (Squeeze): {SQUEEZE_WHY}",
    }
    out = plan.tensors[plan.outputs[0]]
    assert [str(d) for d in out.dims] == ["batch", "t"]  # as compiled: right only where neither is 1


def test_an_expression_records_every_symbol_in_it() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Flatten", ["x"], ["f"], axis=2), helper.make_node("Squeeze", ["f"], ["y"], "sq")]
    model = helper.make_model(
        helper.make_graph(nodes, "flat", [x], [y]), opset_imports=[helper.make_opsetid("", 13)], ir_version=10
    )
    assert sorted(compile_model(model).static_required) == ["b", "s"]  # b * s is 1 only where both are


@pytest.mark.parametrize(
    ("dims", "axes", "opset"),
    [(["batch", 1, 3], [1], 13), (["batch", 1, 3], None, 11), ([2, 1, 3], None, 13)],
    ids=["axes-input", "axes-attribute-opset11-static", "static-dims"],
)
def test_nothing_is_recorded_where_the_rank_is_known(dims: list[int | str], axes: list[int] | None, opset: int) -> None:
    if opset == 11:  # opsets 1-12 take axes as an attribute
        model = _squeeze_model(dims, opset=11)
        model.graph.node[1].attribute.append(helper.make_attribute("axes", [1]))
    else:
        model = _squeeze_model(dims, axes)
    assert compile_model(model).static_required == {}


def test_a_bound_dim_is_not_required_any_more() -> None:
    assert compile_model(_squeeze_model(["batch", 1, "t"]), {"batch": 1}).static_required == {
        "t": f"node 'sq' (Squeeze): {SQUEEZE_WHY}"
    }
    assert compile_model(_squeeze_model(["batch", 1, 3]), {"batch": 2}).static_required == {}


@pytest.mark.parametrize("batch", [1, 2])
def test_a_plan_with_the_dim_bound_squeezes_as_onnxruntime(batch: int) -> None:
    feeds = {"x": np.arange(batch * 3, dtype=np.float32).reshape(batch, 1, 3)}
    (out,) = check_model(_squeeze_model(["batch", 1, 3]), feeds, dims={"batch": batch})
    assert out.shape == ((3,) if batch == 1 else (batch, 3))  # check_model compared with onnxruntime's too


def test_the_runtime_refuses_a_plan_that_left_it_open() -> None:
    plan = compile_model(_squeeze_model(["batch", 1, 3]))
    with pytest.raises(PlanningError) as e:
        runtime().load_model(plan)
    message = str(e.value)
    assert "leaves symbolic the dims ['batch']" in message
    assert "node 'sq' (Squeeze)" in message and "compile with them among the compile dims" in message


def test_a_branch_passes_its_requirement_up_to_the_outer_plan() -> None:
    """If(ReduceSum(x) > 0, Squeeze(x), Squeeze(-x)) on x[batch, 3]: a condition computed on the GPU keeps
    the If (a graph-input condition would be baked in, the branch inlined), whose subplans squeeze an outer dim."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)

    def branch(name: str, nodes: list) -> onnx.GraphProto:
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)])

    then = branch("then", [helper.make_node("Squeeze", ["x"], ["then_y"], "sq_then")])
    other = branch("else", [helper.make_node("Neg", ["x"], ["m"]), helper.make_node("Squeeze", ["m"], ["else_y"])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], "if", then_branch=then, else_branch=other),
    ]
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    graph = helper.make_graph(nodes, "branches", [x], [y], [zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    required = compile_model(model).static_required
    assert required == {"batch": f"node 'if' (If): in subgraph 'then_branch', node 'sq_then' (Squeeze): {SQUEEZE_WHY}"}
    for batch in (1, 2):
        for sign in (1.0, -1.0):  # each branch
            (out,) = check_model(model, {"x": np.full((batch, 3), sign, np.float32)}, dims={"batch": batch})
            assert out.shape == ((3,) if batch == 1 else (batch, 3))
