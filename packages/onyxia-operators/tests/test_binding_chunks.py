"""Inputs over the storage-binding limit, split into ranges: MatMul (plain b by K-ranges, transposed
b by N-ranges) and Gather (embedding rows), against onnxruntime. The planning limit is lowered to
64 KiB so the tensors stay small; the runtime still checks every range against the adapter."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, check_op, compile_model, make_model

from onyxia.core import BINDING_ALIGNMENT, CompiledModel, Dispatch, PlanningError, binding_limit

RNG = np.random.default_rng(7)
LIMIT = 64 << 10


def _random(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _bindings_within(plan: CompiledModel, limit: int) -> int:
    """Assert no binding of `plan` exceeds `limit` and every range is aligned; the largest dispatch count of an op."""
    for op in plan.operations:
        for step in op.steps:
            if not isinstance(step, Dispatch):
                continue
            for b in step.bindings:
                assert isinstance(b.offset, int) and b.offset % BINDING_ALIGNMENT == 0, (op.name, b)
                size = b.size if b.size is not None else plan.tensors[b.buffer.tensor].nbytes - b.offset
                assert size <= limit, f"node '{op.name}' binding {b.binding}: {size} bytes over {limit}"
    return max(sum(isinstance(s, Dispatch) for s in op.steps) for op in plan.operations)


def _transposed_b_model(x: np.ndarray, w: np.ndarray) -> onnx.ModelProto:
    """y = x @ Transpose(w): the tied lm head shape; w is an initializer [N, K] that an embedding Gather also
    reads (as a tied table is), so the product reads it in place as MatMulTransB."""
    nodes = [
        helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "wt"], ["y"]),
        helper.make_node("Gather", ["w", "ids"], ["embedded"]),
    ]
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        nodes,
        "lm_head",
        [
            helper.make_tensor_value_info("x", elem, list(x.shape)),
            helper.make_tensor_value_info("ids", TensorProto.INT64, [2]),
        ],
        [helper.make_empty_tensor_value_info("y"), helper.make_empty_tensor_value_info("embedded")],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("m", [1, 7, 20])
@pytest.mark.parametrize(("dtype", "k", "n", "chunks"), [(np.float32, 70, 600, 3), (np.float16, 70, 600, 2)])
def test_matmul_big_b_in_k_ranges(m: int, dtype: type, k: int, n: int, chunks: int) -> None:
    inputs = {"a": _random((m, k), dtype), "b": _random((k, n), dtype)}
    with binding_limit(LIMIT):
        assert _bindings_within(compile_model(make_model("MatMul", inputs, initializers=["b"])), LIMIT) == chunks
        check_op("MatMul", inputs, initializers=["b"])


def test_matmul_big_b_batched_a() -> None:
    inputs = {"a": _random((2, 3, 70), np.float32), "b": _random((70, 600), np.float32)}
    with binding_limit(LIMIT):
        check_op("MatMul", inputs, initializers=["b"])


@pytest.mark.parametrize("m", [1, 7])  # at M = 20 the [M, 1000] output itself would pass 64 KiB
@pytest.mark.parametrize(("dtype", "n", "k", "chunks"), [(np.float32, 1000, 40, 3), (np.float16, 1000, 48, 2)])
def test_matmul_transposed_big_b_in_n_ranges(m: int, dtype: type, n: int, k: int, chunks: int) -> None:
    model = _transposed_b_model(_random((m, k), dtype), _random((n, k), dtype))
    with binding_limit(LIMIT):
        plan = compile_model(model)
        assert [op.op_type for op in plan.operations] == ["MatMulTransB", "Gather"]  # the transpose never runs
        assert _bindings_within(plan, LIMIT) == chunks
        check_model(model, {"x": _random((m, k), dtype), "ids": np.array([2, 0], np.int64)})


def test_matmul_under_the_limit_is_one_whole_binding() -> None:
    plan = compile_model(make_model("MatMul", {"a": _random((3, 70), np.float32), "b": _random((70, 600), np.float32)}))
    (step,) = plan.operations[0].steps
    assert isinstance(step, Dispatch) and all(b.offset == 0 and b.size is None for b in step.bindings)


@pytest.mark.parametrize(
    ("dtype", "shape", "axis"),
    [
        (np.float32, (1000, 40), 0),
        (np.float16, (1000, 48), 0),
        (np.int64, (1000, 4, 10), 0),
        (np.float32, (1, 1000, 40), 1),
    ],
    ids=str,
)
def test_gather_big_table_in_row_ranges(dtype: type, shape: tuple[int, ...], axis: int) -> None:
    table = (RNG.integers(-50, 50, shape) if dtype == np.int64 else _random(shape, np.float32)).astype(dtype)
    rows = shape[axis]
    indices = np.array([[0, 999, 335, 336, 671], [672, -1, -1000, 500, 0]], np.int64)  # every range, edges, negatives
    assert indices.max() < rows
    model = make_model("Gather", {"data": table, "indices": indices}, {"axis": axis}, initializers=["data"])
    with binding_limit(LIMIT):
        assert _bindings_within(compile_model(model), LIMIT) >= 2
        check_model(model, {"indices": indices})


def test_a_row_over_the_limit_is_a_planning_error() -> None:
    model = make_model("MatMul", {"a": _random((1, 4), np.float32), "b": _random((4, 20000), np.float32)})
    with (
        binding_limit(LIMIT),
        pytest.raises(PlanningError, match=r"'MatMul_0' \(MatMul\): input 1: rows are 80000 bytes.*\(2 rows\) exceeds"),
    ):
        compile_model(model)
