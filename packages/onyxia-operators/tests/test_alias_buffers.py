"""BufferAliasingPass: movement ops become views (chains included) and plan no copy; the declined
cases leave the graph unchanged; outputs unchanged against onnxruntime, at two sizes of a
symbolic dim, for f32, odd-sized f16 and int64 (a view never changes element size)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import numpy as np
import pytest
from oracle import check_model, check_rebinding, compile_model, runtime

from onyxia.compiler import ShapeInferencePass
from onyxia.core import BufferRef, CopyBuffer, DataType, GraphBuilder, IrGraph, TensorDef
from onyxia.onnx import to_onnx
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import BufferAliasingPass

REGISTRY = core_operator_registry()
RNG = np.random.default_rng(5)


def _inferred(b: GraphBuilder) -> IrGraph:
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b.graph


def _ints(b: GraphBuilder, values: list[int], name: str) -> TensorDef:
    return b.constant(np.array(values, np.int64), name)


def _view_chain(dtype: DataType = DataType.FLOAT) -> GraphBuilder:
    """Sigmoid(Unsqueeze(Reshape(Relu(x), [-1]), [0])): a view of a view of an intermediate."""
    b = GraphBuilder("views")
    x = b.input("x", dtype, ["seq", 4])
    r = b.op("Reshape", b.op("Relu", x), _ints(b, [-1], "shape"))
    b.output(b.op("Sigmoid", b.op("Unsqueeze", r, _ints(b, [0], "axes"))))
    return b


def test_a_chain_of_movement_ops_becomes_views() -> None:
    graph = _inferred(_view_chain())
    before = str(graph)
    assert BufferAliasingPass().run(graph, REGISTRY)
    assert str(graph) == textwrap.dedent("""\
        graph views(
          %0:f32[seq,4]  # x
        ) {
          %1:f32[seq,4] = Relu(%0)  # Relu
          %3:i64[1] = Constant(value=tensor[1])  # shape
          %5:f32[4 * seq] = Reshape(%1, %3)  # Reshape
          %7:i64[1] = Constant(value=tensor[1])  # axes
          %9:f32[1,4 * seq] = Unsqueeze(%5, %7)  # Unsqueeze
          %11:f32[1,4 * seq] = Sigmoid(%9)  # Sigmoid
          %5 shares %1
          %9 shares %5
          return %11
        }""")
    assert str(graph).replace("  %5 shares %1\n  %9 shares %5\n", "") == before
    assert not BufferAliasingPass().run(graph, REGISTRY)  # settled


def test_views_plan_no_copy_and_resolve_to_the_root_buffer() -> None:
    model = to_onnx(_inferred(_view_chain()))
    compiled = compile_model(model)
    steps = [step for op in compiled.operations for step in op.steps]
    assert not any(isinstance(step, CopyBuffer) for step in steps)
    relu, unsqueeze = (compiled.tensor_by_name(n).id for n in ("Relu_out0", "Unsqueeze_out0"))
    assert compiled.storage_owners()[BufferRef(tensor=unsqueeze)] == BufferRef(tensor=relu)


def _in_place_state() -> GraphBuilder:
    """present = Concat(past, new) written into past's buffer; y = Relu(Reshape(past))."""
    b = GraphBuilder("state")
    past = b.input("past", DataType.FLOAT, ["past", 4])
    new = b.input("new", DataType.FLOAT, [1, 4])
    present = b.op("Concat", past, new, axis=0)
    b.output(present, b.op("Relu", b.op("Reshape", past, _ints(b, [-1], "shape"))))
    b.graph.aliases[present.id] = past.id
    return b


def _output_view_of_input() -> GraphBuilder:
    b = GraphBuilder("io")
    b.output(b.op("Reshape", b.input("x", DataType.FLOAT, [2, 4]), _ints(b, [-1], "shape")))
    return b


def _folded() -> GraphBuilder:
    b = GraphBuilder("folded")
    x = b.input("x", DataType.FLOAT, [4])
    b.output(b.op("Add", x, b.op("Reshape", b.constant(np.ones((2, 2), np.float32)), _ints(b, [-1], "shape"))))
    return b


@pytest.mark.parametrize(
    "build", [_in_place_state, _output_view_of_input, _folded], ids=["in-place-state", "output-of-input", "folded"]
)
def test_declines(build: Callable[[], GraphBuilder]) -> None:
    graph = _inferred(build())
    before = str(graph)
    assert not BufferAliasingPass().run(graph, REGISTRY)
    assert str(graph) == before


def test_views_of_an_input_and_between_outputs_run() -> None:
    """A view of a graph input feeds Relu; the Relu output and its Flatten are both graph outputs."""
    b = GraphBuilder("outputs")
    x = b.input("x", DataType.FLOAT, [3, 4])
    y1 = b.op("Relu", b.op("Reshape", x, _ints(b, [4, 3], "shape")))
    b.output(y1, b.op("Flatten", y1, axis=0))
    graph = _inferred(b)
    assert BufferAliasingPass().run(graph, REGISTRY)
    assert len(graph.aliases) == 2
    check_model(to_onnx(_inferred(b)), {"x": RNG.standard_normal((3, 4)).astype(np.float32)})


@pytest.mark.parametrize("dtype", [DataType.FLOAT, DataType.FLOAT16, DataType.INT64], ids=["f32", "f16", "i64"])
def test_outputs_unchanged_at_two_sizes(dtype: DataType) -> None:
    b = GraphBuilder("views")
    x = b.input("x", dtype, ["seq", 5])
    r = b.op("Reshape", b.op("Add", x, x), _ints(b, [-1], "shape"))
    b.output(b.op("Mul", b.op("Unsqueeze", r, _ints(b, [0], "axes")), b.op("Identity", r)))
    model = to_onnx(_inferred(b))

    def feed(seq: int) -> dict[str, np.ndarray]:
        return {"x": (RNG.standard_normal((seq, 5)) * 4).astype(dtype.numpy)}

    executor = runtime().load_model(compile_model(model))
    assert len(executor.compiled.aliases) == 3
    check_rebinding(model, [feed(3), feed(11), feed(1)])  # odd f16 counts: 15, 55 and 5 halves
