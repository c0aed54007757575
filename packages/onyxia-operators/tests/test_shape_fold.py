"""Movement ops fold at compile time: constants, shape chains and symbolic values emit no GPU step.

Compile-only (no GPU): graphs come from `GraphBuilder`, results are read off the compiled plan or
off the graph after `ShapeInferencePass` (which folds as it infers).
"""

from __future__ import annotations

import numpy as np
import pytest

from onyxia.compiler import CompilerPipeline, ShapeInferencePass
from onyxia.core import CompiledModel, CopyBuffer, DataType, GraphBuilder, IrGraph, SymbolicExpr, TensorDef, TensorValue
from onyxia.operators import core_operator_registry
from onyxia.operators.elementwise import CAST
from onyxia.operators.gather_scatter import GATHER
from onyxia.operators.rearrange import CONCAT
from onyxia.operators.shape import SHAPE

# the ops shape computations fold through (Shape -> Gather -> Concat -> Reshape, casts between)
MOVEMENT = {**SHAPE, **CONCAT, **GATHER, **CAST}

REGISTRY = core_operator_registry(plugins=False)
BATCH, SEQ = SymbolicExpr.name("batch"), SymbolicExpr.name("seq")


def compile_graph(graph: IrGraph) -> CompiledModel:
    return CompilerPipeline(REGISTRY).compile(graph)


def infer(b: GraphBuilder, y: TensorDef) -> TensorDef:
    """Run inference (with folding) on `b`'s graph in place and return `y` as it ended up."""
    b.output(y)
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b.graph.tensor(y)


def copy_steps(compiled: CompiledModel) -> list[tuple[str, CopyBuffer]]:
    return [(op.op_type, s) for op in compiled.operations for s in op.steps if isinstance(s, CopyBuffer)]


def _shape_chain(dims: list[int | str]) -> GraphBuilder:
    """x[b, s, 8] -> Reshape(x, Concat(Unsqueeze(Shape[0] * Shape[1]), [8])): the exporters' flatten."""
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, dims)
    shape = b.op("Shape", x)
    d0 = b.op("Gather", shape, b.constant(np.array(0, np.int64), "i0"), axis=0)
    d1 = b.op("Gather", shape, b.constant(np.array(-2, np.int64), "i1"), axis=0)
    rows = b.op("Unsqueeze", b.op("Mul", d0, d1), b.constant(np.array([0], np.int64), "axes"))
    target = b.op("Concat", rows, b.constant(np.array([8], np.int64), "eight"), axis=0)
    b.output(b.op("Reshape", x, target, _name="flatten"))
    return b


@pytest.mark.parametrize(
    ("dims", "expected"),
    [([2, 3, 8], (6, 8)), (["batch", "seq", 8], (BATCH * SEQ, 8))],
    ids=["static", "symbolic"],
)
def test_shape_chain_folds_to_a_single_copy(dims: list[int | str], expected: tuple) -> None:
    # The chain itself folds (no dispatch, no step of its own); the data reshape is one CopyBuffer,
    # because x is a graph input and the output needs its own buffer.
    compiled = compile_graph(_shape_chain(dims).graph)
    assert compiled.dispatch_count == 0
    assert [op.op_type for op in compiled.operations] == ["Reshape"]
    ((_, step),) = copy_steps(compiled)
    assert step.size == expected[0] * 8 * 4
    assert compiled.tensor_by_name("flatten_out0").dims == expected


def test_shape_chain_on_constant_data_has_no_steps() -> None:
    b = GraphBuilder()
    x = b.constant(np.arange(48, dtype=np.float32).reshape(2, 3, 8), "x")
    target = b.op("Concat", b.op("Shape", x, end=1), b.constant(np.array([-1], np.int64)), axis=0)
    y = b.op("Reshape", x, target)
    b.output(y)
    compiled = compile_graph(b.graph)
    assert compiled.operations == []
    assert compiled.tensors[y.id].dims == (2, 24)
    np.testing.assert_array_equal(compiled.tensors[y.id].data, np.arange(48, dtype=np.float32).reshape(2, 24))


def _fold_case(b: GraphBuilder, op: str) -> TensorDef:
    """One node of `op` whose inputs are all constants."""
    c = b.constant(np.arange(6, dtype=np.float32).reshape(2, 3, 1), "c")
    ints = b.constant(np.array([1, 0], np.int64), "ints")
    inputs = {
        "Constant": lambda: b.op("Constant", value_ints=[1, 2]),
        "Shape": lambda: b.op("Shape", c),
        "Size": lambda: b.op("Size", c),
        "Reshape": lambda: b.op("Reshape", c, b.constant(np.array([3, 2], np.int64))),
        "Unsqueeze": lambda: b.op("Unsqueeze", c, b.constant(np.array([0], np.int64))),
        "Squeeze": lambda: b.op("Squeeze", c),
        "Flatten": lambda: b.op("Flatten", c, axis=2),
        "Identity": lambda: b.op("Identity", c),
        "Concat": lambda: b.op("Concat", c, c, axis=-1),
        "Gather": lambda: b.op("Gather", c, ints, axis=1),
        "Cast": lambda: b.op("Cast", c, to=int(DataType.INT64)),
        "CastLike": lambda: b.op("CastLike", c, ints),
    }
    return inputs[op]()


@pytest.mark.parametrize("op", sorted({k if isinstance(k, str) else k[0] for k in MOVEMENT}))
def test_every_row_folds_constants(op: str) -> None:
    b = GraphBuilder()
    y = _fold_case(b, op)
    b.output(y)
    compiled = compile_graph(b.graph)
    assert compiled.operations == [] and compiled.dispatch_count == 0
    assert compiled.tensors[y.id].data is not None


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ({}, [2, 3, 4, 5]),
        ({"start": 1}, [3, 4, 5]),
        ({"start": -1}, [5]),
        ({"end": -1}, [2, 3, 4]),
        ({"start": -10, "end": 10}, [2, 3, 4, 5]),
        ({"start": 3, "end": 1}, []),
        ({"start": 1, "end": 3}, [3, 4]),
    ],
)
def test_shape_start_end(attrs: dict, expected: list[int]) -> None:
    b = GraphBuilder()
    y = infer(b, b.op("Shape", b.input("x", DataType.FLOAT, [2, 3, 4, 5]), **attrs))
    assert y.dtype == DataType.INT64
    assert y.value is not None and y.value.dtype == np.int64
    assert y.value.tolist() == expected


def test_symbolic_values_flow_through_gather_concat_cast_unsqueeze() -> None:
    b = GraphBuilder()
    shape = b.op("Shape", b.input("x", DataType.FLOAT, ["batch", "seq", 8]))
    last_two = b.op("Gather", shape, b.constant(np.array([-2, -1], np.int64)), axis=0)
    first = b.op("Unsqueeze", b.op("Gather", shape, b.constant(np.array(0, np.int64))), b.constant(np.array([0])))
    joined = b.op("Concat", first, last_two, axis=0)
    y = infer(b, b.op("Cast", joined, to=int(DataType.INT32)))
    assert y.dtype == DataType.INT32
    assert y.value is not None and y.value.dtype == object
    assert y.value.tolist() == [BATCH, SEQ, 8]
    assert b.graph.tensor(last_two).value.tolist() == [SEQ, 8]


def test_symbolic_value_cast_to_float_is_left_to_the_gpu() -> None:
    b = GraphBuilder()
    shape = b.op("Shape", b.input("x", DataType.FLOAT, ["batch", 8]))
    y = infer(b, b.op("Cast", shape, to=int(DataType.FLOAT)))
    assert y.value is None and y.dtype == DataType.FLOAT and tuple(y.shape.dims) == (2,)


@pytest.mark.parametrize(
    ("dims", "target", "expected"),
    [
        (["batch", "seq", 640], [0, 0, -1, 64], (BATCH, SEQ, 10, 64)),
        (["batch", "seq", 8], [-1, 8], (BATCH * SEQ, 8)),
        (["batch", 6], [-1, 4], ((BATCH * 6) // 4, 4)),
        ([2, "seq"], [2, -1, 1], (2, SEQ, 1)),
    ],
)
def test_reshape_infers_minus_one_with_symbolic_dims(dims: list, target: list[int], expected: tuple) -> None:
    b = GraphBuilder()
    y = infer(b, b.op("Reshape", b.input("x", DataType.FLOAT, dims), b.constant(np.array(target, np.int64))))
    assert tuple(y.shape.dims) == expected


@pytest.mark.parametrize(
    ("attr", "value", "dtype", "expected"),
    [
        ("value_float", 1.5, np.float32, 1.5),
        ("value_floats", [1.0, 2.5], np.float32, [1.0, 2.5]),
        ("value_int", 7, np.int64, 7),
        ("value_ints", [3, -1], np.int64, [3, -1]),
        ("value", TensorValue.from_numpy(np.array([[True, False]])), np.bool_, [[True, False]]),
        ("value", TensorValue.from_numpy(np.zeros((0, 3), np.float16)), np.float16, np.zeros((0, 3)).tolist()),
    ],
)
def test_constant_attribute_forms(attr: str, value: object, dtype: type, expected: object) -> None:
    b = GraphBuilder()
    y = infer(b, b.op("Constant", **{attr: value}))
    assert y.value is not None and y.value.dtype == dtype
    assert y.value.tolist() == expected
    assert y.dtype == DataType.from_numpy(np.dtype(dtype))
