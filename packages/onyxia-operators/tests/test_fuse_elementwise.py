"""FuseElementwise and com.onyxia::FusedElementwise: the graph before and after, the declined cases
(graph unchanged, False), folding of a fused node, and model outputs unchanged against onnxruntime."""

from __future__ import annotations

import json
import logging
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, check_rebinding, compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FuseElementwise

RNG = np.random.default_rng(11)
REGISTRY = core_operator_registry()


def _run(graph: IrGraph) -> bool:
    ShapeInferencePass().run(graph, REGISTRY)
    return FuseElementwise().run(graph, REGISTRY)


def _mlp_gate() -> GraphBuilder:
    b = GraphBuilder("mlp")
    gate = b.input("gate", DataType.FLOAT, ["seq", 8])
    up = b.input("up", DataType.FLOAT, ["seq", 8])
    b.output(b.op("Mul", b.op("Gelu", gate, approximate="tanh"), up))
    return b


def test_gemma_mlp_gate_is_one_node() -> None:
    b = _mlp_gate()
    assert _run(b.graph)
    body = '[{"op": "Gelu", "name": "Gelu", "inputs": ["x0"], "attrs": {"approximate": "tanh"}}, '
    body += '{"op": "Mul", "name": "Mul", "inputs": ["t0", "x1"]}]'
    assert str(b.graph) == textwrap.dedent(f"""\
        graph mlp(
          %0:f32[seq,8]  # gate
          %1:f32[seq,8]  # up
        ) {{
          %4:f32[seq,8] = com.onyxia::FusedElementwise(%0, %1, body='{body}')  # Mul
          return %4
        }}""")
    b.graph.check()
    assert not FuseElementwise().run(b.graph, REGISTRY)  # settled


def _diamond(t_is_output: bool) -> GraphBuilder:
    """t = x * w feeds both Greater and Where; Neg, Where and Clip (known bounds) follow."""
    b = GraphBuilder("diamond")
    x = b.input("x", DataType.FLOAT, [2, 4])
    t = b.op("Mul", x, b.input("w", DataType.FLOAT, [4]))
    where = b.op("Where", b.op("Greater", t, b.constant(np.float32(0))), t, b.op("Neg", x))
    b.output(b.op("Clip", where, b.constant(np.float32(-0.5)), b.constant(np.float32(0.5))))
    if t_is_output:
        b.output(t)
    return b


@pytest.mark.parametrize(
    ("t_is_output", "bodies"),
    [(False, [["Mul", "Greater", "Neg", "Where", "Clip"]]), (True, [["Greater", "Neg", "Where", "Clip"]])],
    ids=["diamond", "intermediate-is-an-output"],
)
def test_clusters_take_intermediates_used_only_inside(t_is_output: bool, bodies: list[list[str]]) -> None:
    b = _diamond(t_is_output)
    assert _run(b.graph)
    fused = b.graph.nodes_of("FusedElementwise", "com.onyxia")
    assert [[s["op"] for s in json.loads(n.attributes["body"])] for n in fused] == bodies
    assert [n.op_type for n in b.graph if n.op_type not in ("Constant", "FusedElementwise")] == ["Mul"] * t_is_output
    b.graph.check()


def test_declines_a_single_op_and_a_used_intermediate() -> None:
    b = GraphBuilder("nothing")
    x = b.input("x", DataType.FLOAT, [4])
    relu = b.op("Relu", x)
    b.output(b.op("Exp", relu), relu)  # Relu's output is also a graph output
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not FuseElementwise().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_declines_when_symbolic_strides_overflow_the_immediates(caplog: pytest.LogCaptureFixture) -> None:
    """Seven rank-9 inputs of symbolic shape, one broadcast: 66 symbolic dims, lavapipe holds 64."""
    b = GraphBuilder("wide")
    dims = [f"d{i}" for i in range(9)]
    xs = [b.input(f"x{i}", DataType.FLOAT, dims if i else [1, *dims[1:]]) for i in range(7)]
    acc = xs[0]
    for x in xs[1:]:
        acc = b.op("Add", acc, x)
    b.output(acc)
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    with caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite"):
        assert not FuseElementwise().run(b.graph, REGISTRY)
    assert str(b.graph) == before
    assert "exceed 256 B of immediates" in caplog.text


def test_a_fused_node_with_known_inputs_folds() -> None:
    """The members' numpy folds run in order, so planning still skips a fused node once its inputs are known."""
    b = GraphBuilder("fold")
    x = b.constant(np.array([[-1.0, 2.0]], np.float32))
    y = b.constant(np.array([3], np.int64))
    body = [
        {"op": "Relu", "name": "r", "inputs": ["x0"]},
        {"op": "Cast", "name": "c", "inputs": ["x1"], "attrs": {"to": int(TensorProto.FLOAT)}},
        {"op": "Mul", "name": "m", "inputs": ["t0", "t1"]},
        {"op": "Greater", "name": "g", "inputs": ["t2", "x0"]},
    ]
    out = b.op("FusedElementwise", x, y, _domain="com.onyxia", body=json.dumps(body))
    b.output(out)
    b.graph.opset_imports["com.onyxia"] = 1
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert (out.dtype, str(out.shape)) == (DataType.BOOL, "[1,2]")
    np.testing.assert_array_equal(out.value, [[True, True]])  # 0 > -1, 6 > 2


# ----- numerics: whole models through the pipeline, against onnxruntime --------------------------
def _model(nodes: list, inputs: list, inits: list, outputs: list[str], opset: int = 21) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fusion", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _vi(name: str, elem: int, dims: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, dims)


def _ops(model: onnx.ModelProto, dims: dict[str, int] | None = None) -> list[str]:
    return [op.op_type for op in compile_model(model, dims).operations]


def test_mlp_gate_matches_onnxruntime() -> None:
    nodes = [helper.make_node("Gelu", ["gate"], ["g"], approximate="tanh"), helper.make_node("Mul", ["g", "up"], ["y"])]
    inputs = [_vi("gate", TensorProto.FLOAT, [1, "seq", 96]), _vi("up", TensorProto.FLOAT, [1, "seq", 96])]
    model = _model(nodes, inputs, [], ["y"])
    assert _ops(model, {"seq": 3}) == ["FusedElementwise"]
    gate, up = (RNG.standard_normal((1, 3, 96)).astype(np.float32) for _ in range(2))
    check_model(model, {"gate": gate, "up": up}, dims={"seq": 3})


def test_broadcasting_where_and_clip_match_onnxruntime() -> None:
    nodes = [
        helper.make_node("Mul", ["x", "w"], ["t"]),
        helper.make_node("Sigmoid", ["b"], ["s"]),
        helper.make_node("Less", ["t", "s"], ["c"]),
        helper.make_node("Abs", ["x"], ["a"]),
        helper.make_node("Sqrt", ["a"], ["r"]),
        helper.make_node("Where", ["c", "r", "s"], ["u"]),
        helper.make_node("Clip", ["u", "lo", "hi"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.float32(v), n) for n, v in (("lo", 0.1), ("hi", 0.9))]
    inputs = [
        _vi("x", TensorProto.FLOAT, [2, 3, 5]),
        _vi("w", TensorProto.FLOAT, [5]),
        _vi("b", TensorProto.FLOAT, [3, 1]),
    ]
    model = _model(nodes, inputs, inits, ["y"])
    assert _ops(model) == ["FusedElementwise"]
    feeds = {k: RNG.standard_normal(s).astype(np.float32) for k, s in (("x", (2, 3, 5)), ("w", (5,)), ("b", (3, 1)))}
    check_model(model, feeds)


def test_two_input_variadic_rows_fuse_and_three_inputs_do_not() -> None:
    """The float16 exports' inlined Gelu adds with Sum; a three-input Sum keeps its own plan."""
    nodes = [
        helper.make_node("Mul", ["x", "w"], ["m"]),
        helper.make_node("Sum", ["x", "m"], ["s"]),
        helper.make_node("Max", ["s", "zero"], ["r"]),
        helper.make_node("Mean", ["r", "x"], ["y"]),
        helper.make_node("Sum", ["y", "x", "w"], ["z"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.float32), "zero")]
    inputs = [_vi("x", TensorProto.FLOAT, [3, 4]), _vi("w", TensorProto.FLOAT, [4])]
    model = _model(nodes, inputs, inits, ["z"])
    assert _ops(model) == ["FusedElementwise", "Sum"]
    feeds = {"x": RNG.standard_normal((3, 4)).astype(np.float32), "w": RNG.standard_normal(4).astype(np.float32)}
    check_model(model, feeds)


def test_int64_and_bool_chains_match_onnxruntime() -> None:
    """int64 lives as i32 and bool as u32 0/1: Mod -> Equal (bool) -> Cast(int64) -> Add, and a bool output."""
    nodes = [
        helper.make_node("Mod", ["i", "three"], ["m"]),
        helper.make_node("Equal", ["m", "zero"], ["e"]),
        helper.make_node("Cast", ["e"], ["ei"], to=TensorProto.INT64),
        helper.make_node("Add", ["ei", "j"], ["y"]),
        helper.make_node("Greater", ["x", "zero_f"], ["p"]),
        helper.make_node("Less", ["x", "one_f"], ["q"]),
        helper.make_node("And", ["p", "q"], ["z"]),
    ]
    inits = [
        numpy_helper.from_array(np.array(3, np.int64), "three"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(0, np.float32), "zero_f"),
        numpy_helper.from_array(np.array(1, np.float32), "one_f"),
    ]
    inputs = [_vi("i", TensorProto.INT64, [7]), _vi("j", TensorProto.INT64, [2, 7]), _vi("x", TensorProto.FLOAT, [9])]
    model = _model(nodes, inputs, inits, ["y", "z"])
    assert _ops(model) == ["FusedElementwise", "FusedElementwise"]
    feeds = {
        "i": np.arange(-3, 4, dtype=np.int64),
        "j": RNG.integers(-100, 100, (2, 7)).astype(np.int64),
        "x": RNG.uniform(-1, 2, 9).astype(np.float32),
    }
    check_model(model, feeds)


def test_float16_chain_matches_onnxruntime() -> None:
    nodes = [
        helper.make_node("Sub", ["x", "y"], ["d"]),
        helper.make_node("Cast", ["d"], ["df"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["df", "w"], ["p"]),
        helper.make_node("Cast", ["p"], ["out"], to=TensorProto.FLOAT16),
    ]
    inputs = [
        _vi("x", TensorProto.FLOAT16, [4, 6]),
        _vi("y", TensorProto.FLOAT16, [6]),
        _vi("w", TensorProto.FLOAT, [4, 1]),
    ]
    model = _model(nodes, inputs, [], ["out"])
    assert _ops(model) == ["FusedElementwise"]
    feeds = {
        "x": RNG.standard_normal((4, 6)).astype(np.float16),
        "y": RNG.standard_normal(6).astype(np.float16),
        "w": RNG.standard_normal((4, 1)).astype(np.float32),
    }
    check_model(model, feeds)


def test_symbolic_broadcast_rebinds_without_recompiling() -> None:
    nodes = [helper.make_node("Sigmoid", ["g"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    inputs = [_vi("x", TensorProto.FLOAT, ["batch", "seq", 8]), _vi("g", TensorProto.FLOAT, [1, "seq", 1])]
    model = _model(nodes, inputs, [], ["y"])
    assert _ops(model) == ["FusedElementwise"]
    sizes = [
        {"x": RNG.standard_normal((b, s, 8)).astype(np.float32), "g": RNG.standard_normal((1, s, 1)).astype(np.float32)}
        for b, s in ((2, 3), (1, 5))
    ]
    check_rebinding(model, sizes)


def test_folded_chains_stay_folded() -> None:
    nodes = [helper.make_node("Neg", ["c"], ["n"]), helper.make_node("Add", ["n", "x"], ["y"])]
    model = _model(
        nodes, [_vi("x", TensorProto.FLOAT, [3])], [numpy_helper.from_array(np.ones(3, np.float32), "c")], ["y"]
    )
    assert _ops(model) == ["Add"]  # Neg folded on the host; one op left, nothing to fuse
