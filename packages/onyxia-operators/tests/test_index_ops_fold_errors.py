"""Indexing ops fold at compile time (constants and symbolic shape values) and name node and op in errors.

Compile-only (no GPU): graphs come from `GraphBuilder`; folded values are checked against
onnxruntime (constants) or the expected `SymbolicExpr`s (shape chains).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from oracle import make_model, reference_outputs

from onyxia.compiler import CompilerPipeline, ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, ShapeInferenceError, SymbolicExpr, TensorDef
from onyxia.operators import core_operator_registry
from onyxia.operators.gather_scatter import GATHER_INDEXED, ONE_HOT, SCATTER
from onyxia.operators.reduction import ARG_REDUCE, CUMSUM

REGISTRY = core_operator_registry(plugins=False)
# the index-data ops (Gather along an axis has its cases in test_shape_fold) and the index/scan reductions
INDEXING = {**GATHER_INDEXED, **SCATTER, **ONE_HOT, **CUMSUM, **ARG_REDUCE}
BATCH, SEQ = SymbolicExpr.name("batch"), SymbolicExpr.name("seq")
RNG = np.random.default_rng(11)
F = RNG.standard_normal((3, 4)).astype(np.float32)

# op -> (inputs, attrs): one case per row, every input a constant
FOLD_CASES: dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]] = {
    "GatherElements": ({"d": F, "i": np.array([[2, -1, 0, 1]], np.int64)}, {"axis": 0}),
    "GatherND": ({"d": F, "i": np.array([[1], [-1], [0]], np.int64)}, {"batch_dims": 1}),
    "ScatterND": (
        {"d": F, "i": np.array([[0, 1], [0, 1], [-1, 3]], np.int64), "u": np.ones(3, np.float32)},
        {"reduction": "add"},
    ),
    "ScatterElements": (
        {"d": F, "i": np.array([[0, -1], [0, 2]], np.int64), "u": np.full((2, 2), 3, np.float32)},
        {"axis": 1, "reduction": "max"},
    ),
    "Scatter": ({"d": F, "i": np.array([[2, 0, 1, 0]], np.int64), "u": np.zeros((1, 4), np.float32)}, {"axis": 0}),
    "CumSum": ({"x": F, "a": np.array(-1, np.int64)}, {"exclusive": 1, "reverse": 1}),
    "ArgMax": ({"x": np.array([[1, 3, 3], [2, 2, 0]], np.int64)}, {"axis": 1, "select_last_index": 1}),
    "ArgMin": ({"x": np.array([[1, 0, 0], [2, 2, 5]], np.float32)}, {"axis": -1, "keepdims": 0}),
    "OneHot": ({"i": np.array([1, -1, 7], np.int64), "n": np.array(3, np.int64), "v": np.array([0, 9], np.int64)}, {}),
}
OPSET = {"Scatter": 10}
X = np.zeros((3, 4), np.float32)


def _build(op: str) -> tuple[GraphBuilder, TensorDef]:
    inputs, attrs = FOLD_CASES[op]
    b = GraphBuilder(opsets={"": OPSET.get(op, 18)})
    y = b.op(op, *[b.initializer(name, value) for name, value in inputs.items()], _name="node0", **attrs)
    b.output(y)
    return b, y


def test_every_row_has_a_fold_case() -> None:
    assert {k if isinstance(k, str) else k[0] for k in INDEXING} == set(FOLD_CASES)


@pytest.mark.parametrize("op", sorted(FOLD_CASES))
def test_constant_inputs_fold_to_no_gpu_step(op: str) -> None:
    b, y = _build(op)
    compiled = CompilerPipeline(REGISTRY).compile(b.graph)
    assert compiled.dispatch_count == 0
    inputs, attrs = FOLD_CASES[op]
    reference_op = "ScatterElements" if op == "Scatter" else op  # no reference kernel for the old name
    (expected,) = reference_outputs(make_model(reference_op, inputs, attrs, opset=18), inputs, "ort")
    np.testing.assert_array_equal(compiled.tensors[y.id].data, expected)
    assert compiled.tensors[y.id].data.dtype == expected.dtype


def _shape_value(op: str, *args: Any, **attrs: Any) -> list[Any]:
    """The folded value of `op(Shape(x), *constants)` for x[batch, seq, 8]."""
    b = GraphBuilder()
    shape = b.op("Shape", b.input("x", DataType.FLOAT, ["batch", "seq", 8]))
    y = b.op(op, shape, *[b.constant(np.asarray(a), f"c{i}") for i, a in enumerate(args)], **attrs)
    b.output(y)
    ShapeInferencePass().run(b.graph, REGISTRY)
    value = b.graph.tensor(y).value
    assert value is not None, f"{op} on a symbolic shape did not fold"
    return value.tolist()


def test_symbolic_shape_values_fold() -> None:
    assert _shape_value("GatherElements", np.array([2, 0, -2], np.int64)) == [8, BATCH, SEQ]
    assert _shape_value("GatherND", np.array([[1], [-1]], np.int64)) == [SEQ, 8]
    assert _shape_value("ScatterND", np.array([[1]], np.int64), np.array([-1], np.int64)) == [BATCH, -1, 8]
    updates = np.array([2, 3], np.int64)
    assert _shape_value("ScatterND", np.array([[0], [0]], np.int64), updates, reduction="add") == [BATCH + 5, SEQ, 8]
    assert _shape_value("ScatterElements", np.array([2], np.int64), np.array([1], np.int64)) == [BATCH, SEQ, 1]
    assert _shape_value("CumSum", np.array(0, np.int64)) == [BATCH, BATCH + SEQ, BATCH + SEQ + 8]


def test_symbolic_max_reduction_is_left_to_the_gpu() -> None:
    # SymbolicExprs have no order, so max/min scatters on them cannot fold
    b = GraphBuilder()
    shape = b.op("Shape", b.input("x", DataType.FLOAT, ["batch", 4]))
    y = b.op(
        "ScatterND", shape, b.constant(np.array([[0]], np.int64)), b.constant(np.array([5], np.int64)), reduction="max"
    )
    b.output(y)
    ShapeInferencePass().run(b.graph, REGISTRY)
    assert b.graph.tensor(y).value is None


# ----- errors -------------------------------------------------------------------------------------
def _infer(op: str, shapes: list[list[Any]], *, dtypes: list[DataType] | None = None, **attrs: Any) -> None:
    """Infer one `op` node on graph inputs of `shapes` (int64 for every input after the first by default)."""
    b = GraphBuilder()
    dtypes = dtypes or [DataType.FLOAT] + [DataType.INT64] * (len(shapes) - 1)
    inputs = [b.input(f"x{i}", dt, s) for i, (dt, s) in enumerate(zip(dtypes, shapes))]
    b.output(b.op(op, *inputs, _name="node0", **attrs))
    ShapeInferencePass().run(b.graph, REGISTRY)


ERRORS = [
    ("GatherElements", [[3, 4], [3, 4]], {"axis": 2}, r"axis 2 is out of range for rank 2"),
    ("GatherElements", [[3, 4], [3]], {}, r"indices \(input 1\) have rank 1; expected the data rank 2"),
    ("GatherND", [[2, 3, 4], [2, 1]], {"batch_dims": 2}, r"batch_dims=2 is out of range"),
    ("GatherND", [[2, 3], [2, 1]], {"batch_dims": -1}, r"batch_dims=-1 is out of range"),
    ("GatherND", [[2, 3], [1, 3]], {}, r"indices rows have 3 components; expected 1..2"),
    ("GatherND", [[2, 3], [3, 1]], {"batch_dims": 1}, r"batch dim 0 differs: data has 2, indices have 3"),
    ("ScatterND", [[4, 5], [2, 1], [2, 4]], {}, r"updates \(input 2\) have shape \[2, 4\]; expected \['2', '5'\]"),
    ("ScatterElements", [[4, 5], [2, 5], [2, 5]], {"axis": -3}, r"axis -3 is out of range for rank 2"),
    ("ScatterElements", [[4, 5], [2, 5], [2, 5]], {"reduction": "sum"}, r"reduction='sum' is not one of"),
    ("ArgMax", [[3, 4]], {"axis": 2}, r"axis 2 is out of range for rank 2"),
    ("ArgMin", [[3, 0]], {"axis": 1}, r"axis 1 is empty"),
]


@pytest.mark.parametrize(("op", "shapes", "attrs", "match"), ERRORS)
def test_bad_attributes_and_shapes_name_node_and_op(op: str, shapes: list, attrs: dict, match: str) -> None:
    with pytest.raises(ShapeInferenceError, match=rf"node 'node0' \({op}.*" + match):
        _infer(op, shapes, **attrs)


def test_float_indices_are_rejected() -> None:
    with pytest.raises(ShapeInferenceError, match=r"node 'node0' \(GatherND.*indices \(input 1\) must be int64"):
        _infer("GatherND", [[3, 4], [2, 1]], dtypes=[DataType.FLOAT, DataType.INT32])


def _infer_constants(op: str, *consts: np.ndarray, **attrs: Any) -> None:
    b = GraphBuilder()
    b.output(b.op(op, *[b.constant(c, f"c{i}") for i, c in enumerate(consts)], _name="node0", **attrs))
    ShapeInferencePass().run(b.graph, REGISTRY)


CONSTANT_ERRORS = [
    ("CumSum", (X, np.array(2, np.int64)), r"axis 2 is out of range for rank 2"),
    ("CumSum", (X, np.array([0, 1], np.int64)), r"axis \(input 1\) must hold one integer"),
    ("GatherElements", (X, np.array([[0, 4]], np.int64)), r"index 4 is out of range for axis 0 of size 3"),
    ("GatherND", (X, np.array([[1, -5]], np.int64)), r"index -5 is out of range for data axis 1 of size 4"),
    (
        "ScatterND",
        (X, np.array([[3]], np.int64), np.ones((1, 4), np.float32)),
        r"index 3 is out of range for data axis 0",
    ),
    (
        "OneHot",
        (np.array([1], np.int64), np.array(0, np.int64), np.array([0, 1], np.float32)),
        r"depth \(input 1\) is 0",
    ),
]


@pytest.mark.parametrize(("op", "consts", "match"), CONSTANT_ERRORS)
def test_bad_constant_inputs_name_node_and_op(op: str, consts: tuple, match: str) -> None:
    with pytest.raises(ShapeInferenceError, match=rf"node 'node0' \({op}.*" + match):
        _infer_constants(op, *consts)


def test_one_hot_needs_a_compile_time_depth() -> None:
    with pytest.raises(ShapeInferenceError, match=r"node 'node0' \(OneHot.*input 1 \(depth\) must be known"):
        _infer("OneHot", [[3], [], [2]], dtypes=[DataType.INT64, DataType.INT64, DataType.FLOAT])
