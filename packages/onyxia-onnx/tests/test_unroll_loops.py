"""`unroll_small_loops`: a Loop that provably runs M <= 16 times is inlined, with onnxruntime's outputs
unchanged; every other Loop (and every model without one) is left exactly as it was."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from control_flow_models import assert_same_outputs, const, f32, model, node_case, op_types, random_feeds
from onnx import TensorProto, helper, numpy_helper

from onyxia.onnx.unroll_loops import MAX_UNROLLED_NODES, MAX_UNROLLED_TRIPS, unroll_small_loops

BOOL, INT64 = TensorProto.BOOL, TensorProto.INT64


@dataclass(frozen=True)
class LoopCase:
    trips: int = 4
    trip_source: str = "initializer"  # or "constant", "input", "input_default" (an overridable initializer)
    cond_source: str = "empty"  # or "true", "input"
    body_cond: str = "passthrough"  # or "identity", "true", "computed"
    opset: int = 21
    padding: int = 0  # extra Identity nodes in the body (the inlined-size budget)
    drop_b_final: bool = False  # b's final value is no graph output
    unnamed_b_final: bool = False  # ... and the Loop leaves that output's name empty


def _loop_body(case: LoopCase) -> onnx.GraphProto:
    """a' = a + b * i, b' = b * k (k a body initializer); scan outputs a' + i and b (a body input)."""
    nodes = [
        helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["b", "fi"], ["bi"]),
        helper.make_node("Add", ["a", "bi"], ["a_pad0"]),
        helper.make_node("Mul", ["b", "k"], ["b_out"]),
    ]
    nodes += [helper.make_node("Identity", [f"a_pad{p}"], [f"a_pad{p + 1}"]) for p in range(case.padding)]
    nodes.append(helper.make_node("Add", [f"a_pad{case.padding}", "fi"], ["scan0"]))
    cond = {"passthrough": "c", "identity": "c_2", "true": "c_true", "computed": "c_less"}[case.body_cond]
    if case.body_cond == "identity":
        nodes += [helper.make_node("Identity", ["c"], ["c_1"]), helper.make_node("Identity", ["c_1"], ["c_2"])]
    elif case.body_cond == "true":
        nodes.append(const("c_true", np.array(True)))
    elif case.body_cond == "computed":
        nodes += [const("three", np.array(3, np.int64)), helper.make_node("Less", ["i", "three"], ["c_less"])]
    return helper.make_graph(
        nodes,
        "body",
        [helper.make_tensor_value_info("i", INT64, []), helper.make_tensor_value_info("c", BOOL, [])]
        + [f32("a", [3]), f32("b", [3])],
        [helper.make_tensor_value_info(cond, BOOL, []), f32(f"a_pad{case.padding}", [3]), f32("b_out", [3])]
        + [f32("scan0", [3]), f32("b", [3])],
        initializer=[numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "k")],
    )


def _loop_model(case: LoopCase) -> onnx.ModelProto:
    nodes, inputs, inits = [], [f32("a0", [3]), f32("b0", [3])], []
    trips = numpy_helper.from_array(np.array(case.trips, np.int64), "M")
    if case.trip_source in ("initializer", "input_default"):
        inits.append(trips)
    if case.trip_source == "input_default":
        inputs.append(helper.make_tensor_value_info("M", INT64, []))
    if case.trip_source == "constant":
        nodes.append(helper.make_node("Constant", [], ["M"], value=trips))
    elif case.trip_source == "input":
        inputs.append(helper.make_tensor_value_info("M", INT64, []))
    cond = "" if case.cond_source == "empty" else "go"
    if case.cond_source == "true":
        nodes.append(const("go", np.array(True)))
    elif case.cond_source == "input":
        inputs.append(helper.make_tensor_value_info("go", BOOL, []))
    finals = ["a_final", "" if case.unnamed_b_final else "b_final"]
    loop = helper.make_node("Loop", ["M", cond, "a0", "b0"], [*finals, "s0", "s1"], body=_loop_body(case))
    outputs = [f32(name, [3]) for name in finals[: 1 if case.drop_b_final else 2]]
    outputs += [f32("s0", [None, 3]), f32("s1", [None, 3])]
    return model([*nodes, loop], inputs, outputs, case.opset, inits)


def _feeds(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    feeds = random_feeds(m)
    if "M" in feeds:
        feeds["M"] = np.array(4, np.int64)
    if "go" in feeds:
        feeds["go"] = np.array(True)
    return feeds


QUALIFYING = {
    "initializer": LoopCase(),
    "one_trip": LoopCase(trips=1),
    "max_trips": LoopCase(trips=MAX_UNROLLED_TRIPS),
    "constant_node": LoopCase(trip_source="constant"),
    "cond_constant_true": LoopCase(cond_source="true"),
    "body_cond_identity": LoopCase(body_cond="identity"),
    "body_cond_true": LoopCase(body_cond="true", cond_source="true"),
    "opset11": LoopCase(opset=11, trips=3),
    "unused_final": LoopCase(drop_b_final=True),
    "at_the_budget": LoopCase(trips=16, padding=MAX_UNROLLED_NODES // 16 - 5),
}


@pytest.mark.parametrize("name", list(QUALIFYING))
def test_qualifying_loops_are_inlined(name: str) -> None:
    original = _loop_model(QUALIFYING[name])
    flat = unroll_small_loops(original)
    assert "Loop" not in op_types(flat.graph)
    read = {name for node in flat.graph.node for name in node.input} | {v.name for v in flat.graph.output}
    read |= {"M", "go", "b_final"}  # the Loop's constant inputs stay; b_final is unread in the original too
    assert all(name in read for node in flat.graph.node for name in node.output)  # no dead copies left
    assert_same_outputs(original, flat, _feeds(original))


def test_an_unnamed_loop_output_is_dropped() -> None:
    """onnxruntime's own Loop crashes on an empty output name, so the oracle names it (unread)."""
    oracle = _loop_model(LoopCase(drop_b_final=True))
    flat = unroll_small_loops(_loop_model(LoopCase(drop_b_final=True, unnamed_b_final=True)))
    assert "Loop" not in op_types(flat.graph)
    assert_same_outputs(oracle, flat, _feeds(oracle))


NOT_QUALIFYING = {
    "zero_trips": LoopCase(trips=0),
    "too_many_trips": LoopCase(trips=MAX_UNROLLED_TRIPS + 1),
    "trips_from_input": LoopCase(trip_source="input"),
    "trips_from_an_input_default": LoopCase(trip_source="input_default"),
    "cond_from_input": LoopCase(cond_source="input"),
    "body_cond_computed": LoopCase(body_cond="computed"),
    "over_the_budget": LoopCase(trips=16, padding=MAX_UNROLLED_NODES // 16 - 4),
}


@pytest.mark.parametrize("name", list(NOT_QUALIFYING))
def test_other_loops_are_kept(name: str) -> None:
    original = _loop_model(NOT_QUALIFYING[name])
    assert unroll_small_loops(original) is original
    onnx.checker.check_model(original, full_check=True)


def _nested(inner_body_extra: list[onnx.NodeProto], inner_trips: str) -> onnx.ModelProto:
    """An outer 3-trip Loop whose body holds an inner Loop (trip count `inner_trips`, a name of the
    outer body) and an If; both read names the outer body defines (`a_mid`, `i`)."""
    inner_body = helper.make_graph(
        [
            helper.make_node("Cast", ["j"], ["fj"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["x", "a_mid"], ["x_sum"]),  # a_mid: the outer body's
            helper.make_node("Add", ["x_sum", "fj"], ["x_out"]),
            *inner_body_extra,
        ],
        "inner",
        [helper.make_tensor_value_info("j", INT64, []), helper.make_tensor_value_info("ci", BOOL, []), f32("x", [3])],
        [helper.make_tensor_value_info("ci", BOOL, []), f32("x_out", [3]), f32("x_sum", [3])],
    )
    then_branch = helper.make_graph([helper.make_node("Neg", ["a_mid"], ["t"])], "then", [], [f32("t", [3])])
    else_branch = helper.make_graph([helper.make_node("Abs", ["x_final"], ["e"])], "else", [], [f32("e", [3])])
    body = helper.make_graph(
        [
            const("inner_m", np.array(2, np.int64)),
            helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["a", "fi"], ["a_mid"]),
            helper.make_node("Loop", [inner_trips, "", "a"], ["x_final", "x_steps"], body=inner_body),
            helper.make_node("If", ["flag"], ["picked"], then_branch=then_branch, else_branch=else_branch),
            helper.make_node("Add", ["picked", "x_final"], ["a_out"]),
        ],
        "outer",
        [helper.make_tensor_value_info("i", INT64, []), helper.make_tensor_value_info("c", BOOL, []), f32("a", [3])],
        [helper.make_tensor_value_info("c", BOOL, []), f32("a_out", [3]), f32("x_steps", [None, 3])],
    )
    loop = helper.make_node("Loop", ["M", "", "a0"], ["a_final", "steps"], body=body)
    inputs = [f32("a0", [3]), helper.make_tensor_value_info("flag", BOOL, [])]
    if inner_trips == "n":
        inputs.append(helper.make_tensor_value_info("n", INT64, []))
    trips = numpy_helper.from_array(np.array(3, np.int64), "M")
    return model([loop], inputs, [f32("a_final", [3]), f32("steps", [None, None, 3])], 21, [trips])


@pytest.mark.parametrize("flag", [True, False])
def test_nested_loop_and_if_reading_the_inlined_body(flag: bool) -> None:
    original = _nested([], "inner_m")
    flat = unroll_small_loops(original)
    assert "Loop" not in op_types(flat.graph) and op_types(flat.graph).count("If") == 3
    feeds = random_feeds(original)
    feeds["flag"] = np.array(flag)
    assert_same_outputs(original, flat, feeds)


def test_a_kept_inner_loop_is_copied_per_iteration_with_renamed_outer_reads() -> None:
    original = _nested([], "n")
    flat = unroll_small_loops(original)
    assert op_types(flat.graph).count("Loop") == 3  # the outer one inlined, the inner one per copy
    feeds = random_feeds(original)
    feeds["flag"], feeds["n"] = np.array(False), np.array(2, np.int64)
    assert_same_outputs(original, flat, feeds)


def test_a_loop_inside_an_if_branch_is_inlined() -> None:
    loop_model = _loop_model(LoopCase(trips=3, body_cond="identity"))
    outputs = list(loop_model.graph.output)
    then_branch = helper.make_graph(list(loop_model.graph.node), "then", [], outputs)
    else_nodes = [helper.make_node("Identity", ["a0"], ["e0"]), helper.make_node("Identity", ["b0"], ["e1"])]
    else_nodes += [const("zero", np.array([0], np.int64)), const("reps", np.array([2, 1], np.int64))]
    else_nodes += [helper.make_node("Unsqueeze", [v, "zero"], [f"{v}_row"]) for v in ("a0", "b0")]
    else_nodes += [helper.make_node("Tile", [f"{v}_row", "reps"], [f"e{k}"]) for k, v in ((2, "a0"), (3, "b0"))]
    else_branch = helper.make_graph(else_nodes, "else", [], [_renamed(o, f"e{k}") for k, o in enumerate(outputs)])
    node = helper.make_node("If", ["take"], [o.name for o in outputs], then_branch=then_branch, else_branch=else_branch)
    inputs = [*loop_model.graph.input, helper.make_tensor_value_info("take", BOOL, [])]
    original = model([node], inputs, outputs, 21, list(loop_model.graph.initializer))
    flat = unroll_small_loops(original)
    assert "Loop" not in op_types(flat.graph)
    for take in (True, False):
        feeds = random_feeds(original)
        feeds["take"] = np.array(take)
        assert_same_outputs(original, flat, feeds)


def _renamed(value: onnx.ValueInfoProto, name: str) -> onnx.ValueInfoProto:
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(value)
    copy.name = name
    return copy


def _baked(m: onnx.ModelProto, feeds: dict[str, np.ndarray], names: set[str]) -> onnx.ModelProto:
    """`m` with the graph inputs `names` turned into initializers holding their `feeds` values."""
    baked = onnx.ModelProto()
    baked.CopyFrom(m)
    kept = [v for v in baked.graph.input if v.name not in names]
    del baked.graph.input[:]
    baked.graph.input.extend(kept)
    baked.graph.initializer.extend(numpy_helper.from_array(feeds[name], name) for name in sorted(names))
    return baked


def test_onnx_loop11_with_a_constant_trip_count_is_inlined() -> None:
    original, feeds = node_case("test_loop11")
    baked = _baked(original, feeds, {"trip_count", "cond"})
    flat = unroll_small_loops(baked)
    assert "Loop" not in op_types(flat.graph)
    assert_same_outputs(original, flat, feeds)  # same feeds, the original reading them at run time
    assert unroll_small_loops(original) is original  # trip count and cond are run-time inputs there


@pytest.mark.parametrize(
    "name", ["test_range_float_type_positive_delta_expanded", "test_range_int32_type_negative_delta_expanded"]
)
def test_onnx_range_expanded_keeps_its_computed_trip_count_loop(name: str) -> None:
    original, feeds = node_case(name)
    assert unroll_small_loops(original) is original
    onnx.checker.check_model(original, full_check=True)
    baked = _baked(original, feeds, {v.name for v in original.graph.input})  # still computed: Ceil/Cast
    assert unroll_small_loops(baked) is baked


def test_models_without_loops_are_returned_as_they_are() -> None:
    plain = model([helper.make_node("Relu", ["x"], ["y"])], [f32("x", [2])], [f32("y", [2])])
    assert unroll_small_loops(plain) is plain
    scan, _ = node_case("test_scan9_sum")
    assert unroll_small_loops(scan) is scan
