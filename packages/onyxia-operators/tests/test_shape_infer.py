"""Shape inference and error messages of the movement ops (compile-only, no GPU).

Errors must name the node, the op and what was wrong, so each test matches on all three.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from onyxia.compiler import CompilerPipeline, ShapeInferencePass
from onyxia.core import (
    FOLD_ELEMENT_LIMIT,
    DataType,
    GraphBuilder,
    ShapeInferenceError,
    SymbolicExpr,
    TensorDef,
    TensorValue,
    UnsupportedOpError,
)
from onyxia.core.dtypes import DemotionWarning
from onyxia.operators import core_operator_registry
from onyxia.operators.shape import RESHAPE

REGISTRY = core_operator_registry(plugins=False)
N = SymbolicExpr.name("n")


def run(
    op: str, dims: list[Any], *consts: Any, opset: int = 21, dtype: DataType = DataType.FLOAT, **attrs: Any
) -> TensorDef:
    """Infer one `op` node on input x[dims]; array `consts` become Constant inputs after x."""
    b = GraphBuilder(opsets={"": opset})
    x = b.input("x", dtype, dims)
    inputs = [None if c is None else b.constant(np.asarray(c), f"c{i}") for i, c in enumerate(consts)]
    y = b.op(op, x, *inputs, _name="node0", **attrs)
    b.output(y)
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b.graph.tensor(y)


# (row key, opset, input dims, constant inputs, attrs, expected output dims)
SHAPE_CASES: list[tuple[Any, int, list, list, dict, tuple]] = [
    (("Reshape", 5, None), 21, [2, 3, 4], [[4, -1]], {}, (4, 6)),
    (("Reshape", 5, None), 21, [2, 3, 4], [[0, 0, -1]], {}, (2, 3, 4)),
    (("Reshape", 5, None), 21, [], [[1, 1, 1, 1, 1, 1]], {}, (1,) * 6),
    (("Reshape", 5, None), 21, [0, 3], [[3, 0]], {"allowzero": 1}, (3, 0)),
    (("Reshape", 5, None), 21, ["n", 4], [[0, 2, 2]], {}, (N, 2, 2)),
    (("Unsqueeze", 13, None), 21, [3, 4], [[0, -1]], {}, (1, 3, 4, 1)),
    (("Unsqueeze", 13, None), 21, [], [[0]], {}, (1,)),
    (("Unsqueeze", 1, 12), 11, ["n", 4], [], {"axes": [1]}, (N, 1, 4)),
    (("Squeeze", 13, None), 21, [1, 3, 1, 4], [[0, -2]], {}, (3, 4)),
    (("Squeeze", 13, None), 21, [1, "n", 1], [], {}, (N,)),
    (("Squeeze", 13, None), 21, ["n", 1], [[]], {}, (N,)),
    (("Squeeze", 1, 12), 11, [1, 3, 1], [], {"axes": [2]}, (1, 3)),
    ("Flatten", 21, [2, 3, 4], [], {}, (2, 12)),
    ("Flatten", 21, [2, 3, 4], [], {"axis": 3}, (24, 1)),
    ("Flatten", 21, ["n", 3, 4], [], {"axis": -2}, (N, 12)),
    ("Flatten", 21, [], [], {"axis": 0}, (1, 1)),
    ("Identity", 21, ["n", 0, 2], [], {}, (N, 0, 2)),
]


def test_every_reshape_row_has_shape_cases() -> None:
    assert {case[0] for case in SHAPE_CASES} == set(RESHAPE)


@pytest.mark.parametrize(("key", "opset", "dims", "consts", "attrs", "expected"), SHAPE_CASES, ids=str)
def test_movement_shape_rule(key: Any, opset: int, dims: list, consts: list, attrs: dict, expected: tuple) -> None:
    op = key if isinstance(key, str) else key[0]
    y = run(op, dims, *[np.array(c, np.int64) for c in consts], opset=opset, **attrs)
    assert tuple(y.shape.dims) == expected and y.dtype == DataType.FLOAT


def test_concat_and_gather_shapes() -> None:
    b = GraphBuilder()
    x, z = b.input("x", DataType.FLOAT, ["a", 3]), b.input("z", DataType.FLOAT, ["b", 3])
    idx = b.input("idx", DataType.INT32, ["k", 2])
    cat, gathered = b.op("Concat", x, z, x, axis=0), b.op("Gather", x, idx, axis=0)
    b.output(cat, gathered)
    ShapeInferencePass().run(b.graph, REGISTRY)
    a, bb = SymbolicExpr.name("a"), SymbolicExpr.name("b")
    assert b.graph.tensor(cat).shape.dims == (a + bb + a, 3)
    assert b.graph.tensor(gathered).shape.dims == (SymbolicExpr.name("k"), 2, 3)


RESHAPE_ERRORS = [
    ([2, 3, 4], [5, -1], {}, r"cannot reshape input \[2,3,4\] to \[5, -1\]: 24 is not divisible by 5"),
    ([2, 3, 4], [5, 5], {}, r"cannot reshape input \[2,3,4\] \(24 elements\) to \[5, 5\]"),
    ([2, 3], [-1, -1], {}, r"shape \[-1, -1\] has more than one -1"),
    ([2, 3], [-2, 3], {}, r"invalid dim -2 at index 0"),
    ([6], [2, 0], {}, r"copies dim 1 \(0\) but the input \[6\] has rank 1"),
    ([0, 3], [0, -1], {"allowzero": 1}, r"has both 0 and -1"),
    ([0, 3], [0, -1], {}, r"cannot infer -1 when the other dims have zero elements"),
]


@pytest.mark.parametrize(("dims", "target", "attrs", "match"), RESHAPE_ERRORS)
def test_reshape_rejects_bad_shapes(dims: list, target: list, attrs: dict, match: str) -> None:
    with pytest.raises(ShapeInferenceError, match=r"node 'node0' \(Reshape.*" + match):
        run("Reshape", dims, np.array(target, np.int64), **attrs)


def test_reshape_needs_a_compile_time_shape() -> None:
    b = GraphBuilder()
    y = b.op("Reshape", b.input("x", DataType.FLOAT, [4]), b.input("s", DataType.INT64, [1]), _name="node0")
    b.output(y)
    with pytest.raises(ShapeInferenceError, match=r"node 'node0' \(Reshape.*input 1 \(shape\) must be known"):
        ShapeInferencePass().run(b.graph, REGISTRY)


AXIS_ERRORS = [
    ("Unsqueeze", [2, 3], [np.array([3])], {}, r"axis 3 is out of range for rank 3"),
    ("Unsqueeze", [2, 3], [np.array([0, -4])], {}, r"repeat an axis"),
    ("Squeeze", [2, 3], [np.array([0])], {}, r"cannot squeeze axis 0: its dim is 2, expected 1"),
    ("Squeeze", [1, 3], [np.array([2])], {}, r"axis 2 is out of range for rank 2"),
    ("Flatten", [2, 3], [], {"axis": 3}, r"axis 3 is out of range for rank 2 \(Flatten accepts \[-2, 2\]\)"),
    ("Concat", [2, 3], [np.ones((2, 3), np.float32)], {"axis": 2}, r"axis 2 is out of range for rank 2"),
    ("Concat", [2, 3], [np.ones((3, 3), np.float32)], {"axis": 1}, r"input 1 has dim 3 on axis 0, expected 2"),
    ("Concat", [2, 3], [np.ones(3, np.float32)], {"axis": 0}, r"input 1 has rank 1, expected 2"),
    ("Concat", [2, 3], [np.ones((2, 3), np.int64)], {"axis": 0}, r"input 1 has dtype int64, expected float"),
    ("Concat", [], [np.float32(1)], {"axis": 0}, r"inputs must have rank >= 1"),
    ("Gather", [2, 3], [np.array([0])], {"axis": -3}, r"axis -3 is out of range for rank 2"),
    ("Gather", [2, 3], [np.array([0.0])], {}, r"indices \(input 1\) must be int32 or int64, found double"),
]


@pytest.mark.parametrize(("op", "dims", "consts", "attrs", "match"), AXIS_ERRORS)
def test_bad_axes_and_inputs_are_rejected(op: str, dims: list, consts: list, attrs: dict, match: str) -> None:
    with pytest.raises(ShapeInferenceError, match=rf"node 'node0' \({op}.*" + match):
        run(op, dims, *consts, **attrs)


def test_gather_fold_rejects_out_of_range_index() -> None:
    b = GraphBuilder()
    y = b.op("Gather", b.constant(np.arange(3.0, dtype=np.float32)), b.constant(np.array([3])), _name="node0")
    b.output(y)
    with pytest.raises(
        ShapeInferenceError, match=r"node 'node0' \(Gather.*index 3 is out of range for axis 0 of size 3"
    ):
        ShapeInferencePass().run(b.graph, REGISTRY)


@pytest.mark.parametrize(
    "to", [DataType.FLOAT8E4M3FN, DataType.BFLOAT16, DataType.STRING]
)  # int4 casts: test_int4_cast.py
def test_cast_rejects_targets_without_a_host_form(to: DataType) -> None:
    with pytest.raises(UnsupportedOpError, match=rf"node 'node0' \(Cast\): target dtype {to.name.lower()}"):
        run("Cast", [2], to=int(to), saturate=1)


def test_cast_to_double_folds_and_is_demoted_on_the_gpu() -> None:
    assert run("Cast", [2], to=int(DataType.DOUBLE)).dtype == DataType.DOUBLE
    b = GraphBuilder()
    folded = b.op("Cast", b.constant(np.array([1.5], np.float32)), to=int(DataType.DOUBLE))
    b.output(b.op("Cast", folded, to=int(DataType.FLOAT16)))
    assert CompilerPipeline(REGISTRY).compile(b.graph).operations == []
    b = GraphBuilder()
    b.output(b.op("Cast", b.input("x", DataType.FLOAT, [2]), to=int(DataType.DOUBLE), _name="node0"))
    with pytest.warns(DemotionWarning, match="double as f32"):
        assert len(CompilerPipeline(REGISTRY).compile(b.graph).operations) == 1
    b = GraphBuilder()  # uint64 is stored as u32 (as int64 as i32): the cast compiles, range-checked at run()
    b.output(b.op("Cast", b.input("x", DataType.FLOAT, [2]), to=int(DataType.UINT64), _name="node0"))
    assert [slot.node for slot in CompilerPipeline(REGISTRY).compile(b.graph).error_slots] == ["node0"]


@pytest.mark.parametrize(
    ("attrs", "error", "match"),
    [
        ({"sparse_value": object()}, UnsupportedOpError, r"node 'node0' \(Constant\): attribute 'sparse_value'"),
        ({"value_strings": [b"a"]}, UnsupportedOpError, r"node 'node0' \(Constant\): attribute 'value_strings'"),
        ({"value_int": 1, "value_float": 1.0}, ShapeInferenceError, r"node 'node0' \(Constant.*exactly one of"),
        ({}, ShapeInferenceError, r"node 'node0' \(Constant.*found none"),
    ],
)
def test_constant_rejects_bad_attributes(attrs: dict, error: type, match: str) -> None:
    b = GraphBuilder()
    b.output(b.op("Constant", _name="node0", **attrs))
    with pytest.raises(error, match=match):
        ShapeInferencePass().run(b.graph, REGISTRY)


def test_constant_larger_than_the_fold_limit_still_folds() -> None:
    """Exporters embed weights as Constants; they become uploaded weights, never a GPU step."""
    b = GraphBuilder()
    big = TensorValue.from_numpy(np.ones(FOLD_ELEMENT_LIMIT + 1, np.float32))
    b.output(b.op("Constant", value=big, _name="node0"))
    compiled = CompilerPipeline(REGISTRY).compile(b.graph)
    assert compiled.operations == []
    assert next(iter(compiled.tensors.values())).data.shape == (FOLD_ELEMENT_LIMIT + 1,)
