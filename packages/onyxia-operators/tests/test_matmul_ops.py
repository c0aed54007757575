"""MatMul against onnxruntime: numpy promotion of 1-D operands, batch broadcasting up to rank 6,
sizes that are not multiples of the shader's block, size-0 dims, symbolic dims, folding."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_op, check_rebinding, compile_model, make_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, ShapeInferenceError
from onyxia.onnx.errors import ModelValidationError
from onyxia.operators import core_operator_registry

RNG = np.random.default_rng(0)

# (a shape, b shape)
SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4, 5)),
    ((4,), (2, 4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((1, 2, 1, 2, 3, 4), (2, 1, 2, 1, 4, 5)),
    ((37, 45), (45, 70)),
    ((1, 130), (130, 67)),
    ((2, 19, 33), (33, 9)),
    ((0, 4), (4, 5)),
    ((3, 0), (0, 5)),
    ((3, 4), (4, 0)),
    ((2, 0, 3, 4), (4, 5)),
]


def _random(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-4, 5, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPES, ids=str)
def test_matmul_float32(a_shape: tuple, b_shape: tuple) -> None:
    check_op("MatMul", {"a": _random(a_shape, np.float32), "b": _random(b_shape, np.float32)})


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.int64], ids=lambda d: d.__name__)
@pytest.mark.parametrize(("a_shape", "b_shape"), [((2, 3, 20), (20, 7)), ((3, 5), (2, 5, 6))], ids=str)
def test_matmul_other_dtypes(a_shape: tuple, b_shape: tuple, dtype: type) -> None:
    check_op("MatMul", {"a": _random(a_shape, dtype), "b": _random(b_shape, dtype)})


def test_matmul_many_rows_block() -> None:
    # M above the few-rows limit takes the 8-row block shape, with ragged row and column edges
    check_op("MatMul", {"a": _random((2, 45, 38), np.float32), "b": _random((38, 61), np.float32)})


def test_matmul_symbolic_dims_rebind_without_recompiling() -> None:
    w = _random((16, 24), np.float32)
    dims = {"a": ["batch", "seq", 16]}
    model = make_model("MatMul", {"a": _random((2, 1, 16), np.float32), "b": w}, initializers=["b"], dim_params=dims)
    check_rebinding(model, [{"a": _random((2, 1, 16), np.float32)}, {"a": _random((3, 23, 16), np.float32)}])


def test_matmul_symbolic_batched_both_sides() -> None:
    a, b = _random((3, 5, 8), np.float32), _random((3, 8, 6), np.float32)
    model = make_model("MatMul", {"a": a, "b": b}, dim_params={"a": ["n", "m", 8], "b": ["n", 8, 6]})
    feeds = [{"a": _random((n, m, 8), np.float32), "b": _random((n, 8, 6), np.float32)} for n, m in [(3, 5), (1, 40)]]
    check_rebinding(model, feeds)


def test_matmul_folds_constants() -> None:
    inputs = {"a": _random((3, 4), np.float32), "b": _random((4, 5), np.float32)}
    assert compile_model(make_model("MatMul", inputs, initializers=["a", "b"])).dispatch_count == 0
    check_op("MatMul", inputs, initializers=["a", "b"])


def test_matmul_rejects_mismatched_inner_dims() -> None:
    """A file is refused at load (onnxruntime refuses it too); a graph built in code by shape inference."""
    model = make_model("MatMul", {"a": _random((3, 4), np.float32), "b": _random((5, 6), np.float32)})
    with pytest.raises(ModelValidationError, match=r"MatMul.*Incompatible dimensions"):
        compile_model(model)
    b = GraphBuilder("mismatch")
    b.output(b.op("MatMul", b.input("a", DataType.FLOAT, [3, 4]), b.input("b", DataType.FLOAT, [5, 6])))
    with pytest.raises(ShapeInferenceError, match=r"MatMul.*dim -2 \(5\) must equal input 0 dim -1 \(4\)"):
        ShapeInferencePass().run(b.graph, core_operator_registry())
