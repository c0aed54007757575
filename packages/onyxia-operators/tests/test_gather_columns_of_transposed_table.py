"""gather_columns_of_transposed_table: the genai builder's tied embedding `Gather(Transpose(W), ids)` gathers
W's columns instead of transposing the whole table (a table past the fold limit, so the Transpose would
run); numerics equal onnxruntime's; another perm or axis declines and the graph stays as it was."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder
from onyxia.core.settings import override
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import CancelTransposes

REGISTRY = core_operator_registry()
HIDDEN, VOCAB = 16, 70_000  # 1.1M elements: past the fold limit, as a real vocabulary is


def _tied_embedding(perm: list[int], axis: int = 0) -> onnx.ModelProto:
    w = np.random.default_rng(0).standard_normal((HIDDEN, VOCAB)).astype(np.float32)
    nodes = [
        helper.make_node("Transpose", ["W"], ["table"], perm=perm),
        helper.make_node("Gather", ["table", "ids"], ["embedded"], axis=axis),
    ]
    graph = helper.make_graph(
        nodes,
        "tied",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("embedded", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "W")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_the_table_is_read_by_columns_and_matches_onnxruntime() -> None:
    model = _tied_embedding([1, 0])
    compiled = compile_model(model)
    assert [op.op_type for op in compiled.operations] == ["Gather", "Transpose"]  # no whole-table Transpose
    ids = np.array([[3, 69_999, 0, 41_000]], np.int64)
    check_model(model, {"ids": ids})


@pytest.mark.parametrize(("perm", "axis"), [([1, 0], 1), ([0, 1], 0)])
def test_other_perms_or_axes_are_left_alone(perm: list[int], axis: int) -> None:
    b = GraphBuilder("other")
    w = b.initializer("W", np.zeros((4, 1_200_000 // 4), np.float32))
    ids = b.input("ids", DataType.INT64, [1, 2])
    b.output(b.op("Gather", b.op("Transpose", w, perm=perm), ids, axis=axis))
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not CancelTransposes().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_a_table_over_the_binding_limit_is_gathered_by_outer_row_ranges() -> None:
    """Gather on axis 1 of a [hidden, vocab] table bigger than a binding: one dispatch per range of
    hidden rows (OUTER_CHUNKED), every output written once; equal to onnxruntime."""
    with override(max_binding_bytes=2 << 20):  # the 4.5 MB table, 280 KB per hidden row: ranges of 4 rows
        model = _tied_embedding([1, 0])
        compiled = compile_model(model)
        gather = next(op for op in compiled.operations if op.op_type == "Gather")
        assert len(gather.steps) == HIDDEN // 4
        check_model(model, {"ids": np.array([[3, 69_999, 0, 41_000, 7]], np.int64)})
