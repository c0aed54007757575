"""`lower_scans`: every Scan becomes a Loop that onnxruntime runs to exactly the Scan's outputs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import pytest
from control_flow_models import (
    assert_same_outputs,
    f32,
    model,
    node_case,
    node_case_names,
    op_types,
    random_feeds,
)
from onnx import TensorProto, helper

from onyxia.onnx.scan_as_loop import lower_scans
from onyxia.onnx.unroll_loops import unroll_small_loops

SLICE = [3, 4]
ANY3: list[int | str | None] = [None, None, None]  # rank 3, dims unknown


@dataclass(frozen=True)
class ScanCase:
    states: int = 1
    inputs: int = 1
    outputs: int = 1
    in_axes: tuple[int, ...] | None = None
    in_dirs: tuple[int, ...] | None = None
    out_axes: tuple[int, ...] | None = None
    out_dirs: tuple[int, ...] | None = None
    opset: int = 21
    outer_read: bool = False
    typed_body_outputs: bool = True
    passthrough: bool = False  # the third scan output is the body input x0 itself, not Identity(x0)


def _scan_body(case: ScanCase) -> onnx.GraphProto:
    """States s_i, slices x_j: acc = sum x_j (+ outer w), s_i' = s_i + acc (Mul for i > 0); outputs:
    s0' - x0, acc * s0, and x0 (passed straight out, or through an Identity)."""
    states = [f"s{i}" for i in range(case.states)]
    xs = [f"x{j}" for j in range(case.inputs)]
    nodes, acc = [], xs[0]
    for j, x in enumerate(xs[1:]):
        nodes.append(helper.make_node("Add", [acc, x], [f"acc{j}"]))
        acc = f"acc{j}"
    if case.outer_read:
        nodes.append(helper.make_node("Add", [acc, "w"], ["acc_w"]))
        acc = "acc_w"
    new = [f"{s}_out" for s in states]
    for i, (s, out) in enumerate(zip(states, new, strict=True)):
        nodes.append(helper.make_node("Add" if i == 0 else "Mul", [s, acc], [out]))
    nodes += [helper.make_node("Sub", [new[0], xs[0]], ["y0"]), helper.make_node("Mul", [acc, states[0]], ["y1"])]
    nodes.append(helper.make_node("Identity", [xs[0]], ["y2"]))
    ys = ["y0", "y1", xs[0] if case.passthrough else "y2"][: case.outputs]
    shape = SLICE if case.typed_body_outputs else None
    return helper.make_graph(nodes, "body", [f32(v, SLICE) for v in states + xs], [f32(v, shape) for v in new + ys])


_ATTRIBUTES = {
    "in_axes": "scan_input_axes",
    "in_dirs": "scan_input_directions",
    "out_axes": "scan_output_axes",
    "out_dirs": "scan_output_directions",
}


def _scan_model(case: ScanCase, steps: int | str = 5) -> onnx.ModelProto:
    attrs: dict[str, Any] = {"num_scan_inputs": case.inputs}
    for field, attr in _ATTRIBUTES.items():
        if getattr(case, field) is not None:
            attrs[attr] = list(getattr(case, field))
    inputs = [f32(f"init{i}", SLICE) for i in range(case.states)]
    for j in range(case.inputs):
        axis = (case.in_axes or (0,) * case.inputs)[j] % 3
        dims: list[int | str] = list(SLICE)
        dims.insert(axis, steps)
        inputs.append(f32(f"xs{j}", dims))
    if case.outer_read:
        inputs.append(f32("w", SLICE))
    outputs = [f32(f"final{i}", SLICE) for i in range(case.states)]
    outputs += [f32(f"ys{k}", ANY3) for k in range(case.outputs)]
    scan = helper.make_node(
        "Scan", [v.name for v in inputs if v.name != "w"], [v.name for v in outputs], body=_scan_body(case), **attrs
    )
    return model([scan], inputs, outputs, case.opset)


CASES = {
    "default": ScanCase(),
    "reverse_input": ScanCase(in_dirs=(1,)),
    "reverse_output": ScanCase(out_dirs=(1,)),
    "input_axis_1": ScanCase(in_axes=(1,)),
    "input_axis_-1": ScanCase(in_axes=(-1,)),
    "output_axis_1": ScanCase(out_axes=(1,)),
    "output_axis_-1": ScanCase(out_axes=(-1,)),
    "output_axis_2_reversed": ScanCase(out_axes=(2,), out_dirs=(1,)),
    "outer_read": ScanCase(outer_read=True, in_dirs=(1,)),
    "untyped_body_outputs": ScanCase(outputs=2, out_axes=(1, -2), typed_body_outputs=False),
    "mixed": ScanCase(
        states=2, inputs=2, outputs=3, in_axes=(2, -2), in_dirs=(1, 0), out_axes=(0, -1, 1), out_dirs=(1, 1, 0)
    ),
    "mixed_opset9": ScanCase(
        states=2, inputs=2, outputs=3, in_axes=(2, 1), in_dirs=(0, 1), out_axes=(1, 0, 2), out_dirs=(0, 1, 1), opset=9
    ),
    "mixed_opset11": ScanCase(
        states=2,
        inputs=2,
        outputs=3,
        in_axes=(0, -1),
        in_dirs=(1, 1),
        out_axes=(-3, 2, 0),
        out_dirs=(1, 0, 1),
        opset=11,
    ),
}


@pytest.mark.parametrize("steps", [5, "T"], ids=["static", "symbolic"])
@pytest.mark.parametrize("name", list(CASES))
def test_scan_lowers_to_a_loop_with_the_same_outputs(name: str, steps: int | str) -> None:
    original = _scan_model(CASES[name], steps)
    lowered = lower_scans(original)
    assert "Scan" not in op_types(lowered.graph) and "Loop" in op_types(lowered.graph)
    if steps == "T":  # the trip count is the scan input's dim, read at run time
        assert "Shape" in op_types(lowered.graph)
    for seed, length in enumerate([5, 1] if steps == "T" else [5]):
        assert_same_outputs(original, lowered, random_feeds(original, {"T": length}, seed))


@pytest.mark.parametrize("name", ["mixed", "mixed_opset9", "mixed_opset11"])
def test_a_body_input_passed_out_as_a_scan_output(name: str) -> None:
    """onnxruntime's own Scan returns zeros for such an output when it is reversed or transposed, so
    the oracle is the same Scan with an Identity in between."""
    oracle = _scan_model(CASES[name], "T")
    lowered = lower_scans(_scan_model(dataclasses.replace(CASES[name], passthrough=True), "T"))
    assert "Scan" not in op_types(lowered.graph)
    assert_same_outputs(oracle, lowered, random_feeds(oracle, {"T": 4}))


@pytest.mark.parametrize("name", ["default", "mixed", "mixed_opset9"])
def test_a_static_scan_then_unrolls_to_plain_ops(name: str) -> None:
    original = _scan_model(CASES[name], 5)
    flat = unroll_small_loops(lower_scans(original))
    assert not {"Scan", "Loop"} & set(op_types(flat.graph))
    assert_same_outputs(original, flat, random_feeds(original))


def test_scan_inside_an_if_branch_is_lowered() -> None:
    inner = _scan_model(ScanCase(outputs=2, in_dirs=(1,), out_axes=(0, 1)), "T")
    then_branch = helper.make_graph(list(inner.graph.node), "then", [], [f32("final0", SLICE), f32("ys0", ANY3)])
    else_nodes = [helper.make_node("Identity", ["init0"], ["e0"]), helper.make_node("Identity", ["xs0"], ["e1"])]
    else_branch = helper.make_graph(else_nodes, "else", [], [f32("e0", SLICE), f32("e1", ANY3)])
    node = helper.make_node("If", ["c"], ["out0", "out1"], then_branch=then_branch, else_branch=else_branch)
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    original = model([node], [*inner.graph.input, cond], [f32("out0", SLICE), f32("out1", ANY3)])
    lowered = lower_scans(original)
    assert "Scan" not in op_types(lowered.graph)
    for take in (True, False):
        feeds = random_feeds(original, {"T": 3})
        feeds["c"] = np.array(take)
        assert_same_outputs(original, lowered, feeds)


def test_scan_inside_a_scan_body_reading_the_outer_body() -> None:
    """Rows of each [R, C] step are scanned by an inner Scan whose body reads the outer body's slice."""
    inner_body = helper.make_graph(
        [
            helper.make_node("Add", ["acc", "row"], ["acc_out"]),
            helper.make_node("ReduceMax", ["step"], ["peak"], keepdims=0),  # the outer body's slice
            helper.make_node("Mul", ["acc_out", "peak"], ["row_out"]),
        ],
        "inner",
        [f32("acc", [4]), f32("row", [4])],
        [f32("acc_out", [4]), f32("row_out", [4])],
    )
    inner = helper.make_node(
        "Scan", ["s", "step"], ["inner_final", "rows"], body=inner_body, num_scan_inputs=1, scan_input_directions=[1]
    )
    outer_body = helper.make_graph(
        [inner, helper.make_node("Add", ["s", "inner_final"], ["s_out"])],
        "outer",
        [f32("s", [4]), f32("step", [3, 4])],
        [f32("s_out", [4]), f32("rows", [3, 4])],
    )
    scan = helper.make_node(
        "Scan", ["init", "xs"], ["final", "ys"], body=outer_body, num_scan_inputs=1, scan_output_axes=[-1]
    )
    original = model([scan], [f32("init", [4]), f32("xs", ["T", 3, 4])], [f32("final", [4]), f32("ys", ANY3)])
    lowered = lower_scans(original)
    assert op_types(lowered.graph).count("Loop") == 2 and "Scan" not in op_types(lowered.graph)
    assert_same_outputs(original, lowered, random_feeds(original, {"T": 6}))


def test_scan_inside_a_loop_body() -> None:
    scan_model = _scan_model(ScanCase(in_dirs=(1,), outer_read=True), "T")
    scan = scan_model.graph.node[0]
    del scan.input[0]
    scan.input.insert(0, "carried")
    scan.output[0] = "carried_out"
    body = helper.make_graph(
        [scan, helper.make_node("Identity", ["cond"], ["cond_out"])],
        "loop_body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            f32("carried", SLICE),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), f32("carried_out", SLICE), f32("ys0", ANY3)],
    )
    trips = helper.make_tensor_value_info("M", TensorProto.INT64, [])
    loop = helper.make_node("Loop", ["M", "", "init0"], ["final", "stacked"], body=body)
    inputs = [trips, *scan_model.graph.input]
    original = model([loop], inputs, [f32("final", SLICE), f32("stacked", [None, *ANY3])])
    lowered = lower_scans(original)
    assert "Scan" not in op_types(lowered.graph)
    feeds = random_feeds(original, {"T": 4})
    feeds["M"] = np.array(3, np.int64)
    assert_same_outputs(original, lowered, feeds)


@pytest.mark.parametrize(
    "name", ["test_scan9_sum", "test_scan9_multi_state", "test_scan9_scalar", *node_case_names("test_linear_attention")]
)
def test_onnx_node_cases(name: str) -> None:
    original, feeds = node_case(name)
    if "Scan" not in op_types(original.graph):
        pytest.fail(f"{name} has no Scan")
    lowered = lower_scans(original)
    assert "Scan" not in op_types(lowered.graph)
    assert_same_outputs(original, lowered, feeds)
    assert_same_outputs(original, unroll_small_loops(lowered), feeds)


def test_opset8_scan_is_left_for_the_loader_to_refuse() -> None:
    original, _ = node_case("test_scan_sum")
    assert lower_scans(original) is original


def test_models_without_scan_are_returned_as_they_are() -> None:
    plain = model([helper.make_node("Relu", ["x"], ["y"])], [f32("x", [2])], [f32("y", [2])])
    assert lower_scans(plain) is plain
    with_loop, _ = node_case("test_loop11")
    assert lower_scans(with_loop) is with_loop
