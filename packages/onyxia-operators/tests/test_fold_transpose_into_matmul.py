"""FoldTransposeIntoMatMul: the graph before and after, the declined cases (graph unchanged, False),
and model outputs unchanged against onnxruntime."""

from __future__ import annotations

import textwrap

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import check_model, compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph, TensorDef
from onyxia.onnx import to_onnx
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import FoldTransposeIntoMatMul

RNG = np.random.default_rng(3)
REGISTRY = core_operator_registry()


def _lm_head(
    perm: list[int] | None = None, w_dims: list[int] | None = None, k: int = 4
) -> tuple[GraphBuilder, TensorDef]:
    """x[seq, k] @ Transpose(w, perm); the default is the tied lm head, w [6, 4] with perm [1, 0]."""
    perm, w_dims = (perm, w_dims) if w_dims else ([1, 0], [6, 4])
    b = GraphBuilder("lm_head")
    x = b.input("x", DataType.FLOAT, ["seq", k])
    w = b.input("w", DataType.FLOAT, list(w_dims))
    wt = b.op("Transpose", w) if perm is None else b.op("Transpose", w, perm=list(perm))
    b.output(b.op("MatMul", x, wt))
    return b, wt


def _run(graph: IrGraph) -> bool:
    ShapeInferencePass().run(graph, REGISTRY)
    return FoldTransposeIntoMatMul().run(graph, REGISTRY)


def test_tied_lm_head_reads_the_table_in_place() -> None:
    b, _ = _lm_head()
    assert _run(b.graph)
    assert str(b.graph) == textwrap.dedent("""\
        graph lm_head(
          %0:f32[seq,4]  # x
          %1:f32[6,4]  # w
        ) {
          %4:f32[seq,6] = com.onyxia::MatMulTransB(%0, %1)  # MatMul
          return %4
        }""")
    b.graph.check()
    assert not FoldTransposeIntoMatMul().run(b.graph, REGISTRY)  # settled
    assert any(o.domain == "com.onyxia" for o in to_onnx(b.graph).opset_import)  # still exportable


def test_batched_swap_of_the_last_two_axes() -> None:
    b, _ = _lm_head([0, 2, 1], [1, 6, 4])
    assert _run(b.graph)
    assert [n.op_type for n in b.graph] == ["MatMulTransB"]


@pytest.mark.parametrize(
    ("perm", "w_dims", "k"),
    [([1, 0, 2], [3, 4, 6], 3), (None, [6, 4, 2], 4), ([2, 0, 1], [4, 2, 6], 4)],
    ids=["leading-swap", "default-reverse-rank3", "rotation"],
)
def test_declines_other_permutations(perm: list[int] | None, w_dims: list[int], k: int) -> None:
    b, _ = _lm_head(perm, w_dims, k)
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not FoldTransposeIntoMatMul().run(b.graph, REGISTRY)
    assert str(b.graph) == before


@pytest.mark.parametrize("use", ["consumer", "graph-output"])
def test_declines_when_the_transpose_has_other_uses(use: str) -> None:
    b, wt = _lm_head()
    if use == "consumer":
        b.output(b.op("Relu", wt))
    else:
        b.output(wt)
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not FoldTransposeIntoMatMul().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def _model(x: np.ndarray, w: np.ndarray, perm: list[int], *, w_initializer: bool) -> onnx.ModelProto:
    nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=perm), helper.make_node("MatMul", ["x", "wt"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [*x.shape[:-2], "seq", x.shape[-1]])]
    if not w_initializer:
        inputs.append(helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, list(w.shape)))
    inits = [numpy_helper.from_array(w, "w")] if w_initializer else []
    graph = helper.make_graph(nodes, "lm_head", inputs, [helper.make_empty_tensor_value_info("y")], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("w_initializer", [True, False], ids=["folded-transpose", "runtime-weight"])
@pytest.mark.parametrize(
    ("x_shape", "w_shape", "perm"), [((5, 33), (70, 33), [1, 0]), ((2, 5, 33), (2, 70, 33), [0, 2, 1])]
)
def test_outputs_unchanged(x_shape: tuple, w_shape: tuple, perm: list[int], w_initializer: bool) -> None:
    x, w = RNG.standard_normal(x_shape).astype(np.float32), RNG.standard_normal(w_shape).astype(np.float32)
    model = _model(x, w, perm, w_initializer=w_initializer)
    assert [op.op_type for op in compile_model(model, {"seq": 5}).operations] == ["MatMulTransB"]
    feeds = {"x": x} if w_initializer else {"x": x, "w": w}
    check_model(model, feeds, dims={"seq": 5})
