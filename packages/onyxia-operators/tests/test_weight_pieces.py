"""Weights over the buffer limit, uploaded as row pieces each in a buffer of its own (`onyxia.core.weight_pieces`):
Gather by rows and by a tied table's columns, MatMul by K-ranges and MatMulTransB by N-ranges, against
onnxruntime. The limits are lowered (buffer 64 KiB, binding 32 KiB) so small weights split into several
pieces of several ranges each; the runtime still checks every buffer and range against the adapter."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import check_model, compile_model, make_model

from onyxia.core import BINDING_ALIGNMENT, CompiledModel, Dispatch, TensorRole
from onyxia.core.settings import override

RNG = np.random.default_rng(11)
BUFFER, BINDING = 64 << 10, 32 << 10


def _random(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _pieces(plan: CompiledModel, weight: str, buffer: int = BUFFER, binding: int = BINDING) -> int:
    """Assert every uploaded weight fits `buffer`, every binding `binding` (aligned) and `weight` itself is
    not uploaded; the number of `weight`'s pieces."""
    weights = [t for t in plan.tensors.values() if t.role is TensorRole.WEIGHT]
    assert all(t.nbytes <= buffer for t in weights), [(t.name, t.nbytes) for t in weights if t.nbytes > buffer]
    assert weight not in {t.name for t in weights}
    for op in plan.operations:
        for step in (s for s in op.steps if isinstance(s, Dispatch)):
            for b in step.bindings:
                size = b.size if b.size is not None else plan.tensors[b.buffer.tensor].nbytes - b.offset
                assert isinstance(b.offset, int) and b.offset % BINDING_ALIGNMENT == 0, (op.name, b)
                assert size <= binding, (op.name, b)
    return sum(t.name.startswith(f"{weight}:rows-") for t in weights)


def _model(
    nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray]
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "pieces",
        [
            helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
            for k, v in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(n.output[0]) for n in nodes[-1:]],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _check(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    weight: str,
    pieces: int,
    buffer: int = BUFFER,
    binding: int = BINDING,
) -> None:
    with override(max_buffer_bytes=buffer, max_binding_bytes=binding):
        assert _pieces(compile_model(model), weight, buffer, binding) == pieces
        check_model(model, feeds)


@pytest.mark.parametrize(
    ("dtype", "shape", "pieces"),
    [
        (np.float32, (1000, 40), 3),
        (np.float16, (1000, 72), 3),
        (np.int64, (1000, 5, 4), 2),
    ],  # int64 lives as i32: 80 KB
    ids=str,
)
def test_gather_rows_of_a_table_in_pieces(dtype: type, shape: tuple[int, ...], pieces: int) -> None:
    table = (RNG.integers(-50, 50, shape) if dtype == np.int64 else _random(shape, np.float32)).astype(dtype)
    indices = np.array([[0, 999, 333, 334, 667], [666, -1, -1000, 500, 1]], np.int64)  # every piece, edges, negatives
    model = make_model("Gather", {"data": table, "indices": indices}, {"axis": 0}, initializers=["data"])
    _check(model, {"indices": indices}, "data", pieces)


def test_gather_columns_of_a_tied_table_in_pieces() -> None:
    """The genai tied embedding, Gather(Transpose(w)): gathered on axis 1 (`gather_columns_of_transposed_table`),
    in pieces of w's [hidden] rows. The table passes the fold limit, else the Transpose would fold away."""
    w = _random((16, 65600), np.float32)  # [hidden, vocab]: rows of 262400 bytes, 3 a piece, 1 a binding
    ids = np.array([[3, 65599, 0, 40000]], np.int64)
    nodes = [
        helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
        helper.make_node("Gather", ["wt", "ids"], ["y"]),
    ]
    _check(_model(nodes, {"ids": ids}, {"w": w}), {"ids": ids}, "w", 6, buffer=1 << 20, binding=512 << 10)


@pytest.mark.parametrize("m", [1, 5])
def test_matmul_weight_in_pieces_of_k(m: int) -> None:
    a, b = _random((m, 70), np.float32), _random((70, 600), np.float32)  # 168 KB: K-ranges over 3 pieces
    model = make_model("MatMul", {"a": a, "b": b}, initializers=["b"])
    _check(model, {"a": a}, "b", 3)


@pytest.mark.parametrize("m", [1, 5])
def test_tied_lm_head_in_pieces_of_n(m: int) -> None:
    """MatMul(x, Transpose(w)) runs as MatMulTransB over w's [vocab] rows; the embedding reads the same pieces."""
    w = _random((1000, 40), np.float32)  # [vocab, hidden]
    x, ids = _random((m, 40), np.float32), np.array([7, 999, 0], np.int64)
    nodes = [
        helper.make_node("Gather", ["w", "ids"], ["e"]),
        helper.make_node("ReduceSum", ["e"], ["s"], keepdims=1, axes=None),
        helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "wt"], ["logits"]),
        helper.make_node("Add", ["logits", "s"], ["y"]),
    ]
    _check(_model(nodes, {"x": x, "ids": ids}, {"w": w}), {"x": x, "ids": ids}, "w", 3)


def test_weight_under_the_buffer_limit_is_one_buffer() -> None:
    a, b = _random((1, 70), np.float32), _random((70, 600), np.float32)
    with override(max_binding_bytes=BINDING):
        plan = compile_model(make_model("MatMul", {"a": a, "b": b}, initializers=["b"]))
    assert "b" in {t.name for t in plan.tensors.values()}
    assert not any(":rows-" in t.name for t in plan.tensors.values())
