"""The decode-step paths of the matrix products, against onnxruntime: MatMul by a compile-time weight (bound
as column panels, planned by MatMulGroup's shader), a weight that another op also reads (left as stored), and
the one-row MatMulTransB kernel over b's rows in place, with its fallback when K is not whole vec4s."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import check_model, check_op, check_rebinding, compile_model, make_model

from onyxia.core import CompiledModel, TensorRole

RNG = np.random.default_rng(11)


def _random(shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _weights(plan: CompiledModel) -> set[str]:
    return {t.name for t in plan.tensors.values() if t.role is TensorRole.WEIGHT}


def _shaders(plan: CompiledModel) -> list[str]:
    """The shaders' labels without the kernel variant (`@simd8` on lavapipe)."""
    return sorted({shader.label.partition("@")[0] for shader in plan.shaders})


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: d.__name__)
@pytest.mark.parametrize(("a_shape", "k", "n"), [((1, 37), 37, 45), ((5, 64), 64, 33), ((2, 20, 30), 30, 70)], ids=str)
def test_matmul_by_a_weight_reads_panels(a_shape: tuple[int, ...], k: int, n: int, dtype: type) -> None:
    """Ragged K and N (the panels' zero columns are never stored), one row, few rows, many rows."""
    inputs = {"a": _random(a_shape, dtype), "b": _random((k, n), dtype)}
    model = make_model("MatMul", inputs, initializers=["b"])
    plan = compile_model(model)
    assert _weights(plan) == {"b:panels-32"} and _shaders(plan) == ["matmul/matmul_group"]
    tolerance = None if dtype == np.float32 else (1e-2, 5e-2)  # onnxruntime's f16 MatMul sums in another order
    check_op("MatMul", inputs, initializers=["b"], tolerance=tolerance)


def test_matmul_by_a_weight_decodes_and_prefills_in_one_plan() -> None:
    """A symbolic M plans the one-row, the few-rows and the many-rows block; each run dispatches one of them."""
    model = make_model(
        "MatMul", {"a": _random((1, 48)), "b": _random((48, 80))}, initializers=["b"], dim_params={"a": ["seq", 48]}
    )
    check_rebinding(model, [{"a": _random((m, 48))} for m in (1, 9, 40, 1)])


def test_grouped_weights_are_uploaded_once() -> None:
    """A MatMulGroup binds only the panels: the graph tensors never enter the plan beside them."""
    weights = [numpy_helper.from_array(_random((16, n)), f"w{i}") for i, n in enumerate((24, 8))]
    nodes = [helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"]) for i in range(2)]
    graph = helper.make_graph(
        nodes,
        "group",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["seq", 16])],
        [helper.make_empty_tensor_value_info(f"y{i}") for i in range(2)],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    plan = compile_model(model)
    assert [op.op_type for op in plan.operations] == ["MatMulGroup"]
    assert _weights(plan) == {"w0:panels-32", "w1:panels-32"}
    check_model(model, {"x": _random((1, 16))})


def test_a_weight_another_op_reads_stays_as_stored() -> None:
    """Panels would replace the graph tensor on the GPU; a weight an Add also reads is bound as stored."""
    w = numpy_helper.from_array(_random((16, 24)), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["w", "w"], ["z"])]
    graph = helper.make_graph(
        nodes,
        "shared_weight",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 16])],
        [helper.make_empty_tensor_value_info("y"), helper.make_empty_tensor_value_info("z")],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    assert _weights(compile_model(model)) == {"w"}
    check_model(model, {"x": _random((3, 16))})


def _lm_head(k: int, n: int, dtype: type = np.float32) -> onnx.ModelProto:
    """x[seq, k] @ Transpose(w [n, k]): folded into MatMulTransB, w read in place."""
    nodes = [
        helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "wt"], ["y"]),
    ]
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        nodes,
        "lm_head",
        [helper.make_tensor_value_info("x", elem, ["seq", k])],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(_random((n, k), dtype), "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: d.__name__)
def test_one_row_transposed_product_walks_rows(dtype: type) -> None:
    """N not a multiple of a workgroup's rows; the same plan serves prefill through matmul.wgsl."""
    model = _lm_head(k=64, n=333, dtype=dtype)
    assert _shaders(compile_model(model)) == ["matmul/matmul", "matmul/matmul_rows"]
    check_rebinding(model, [{"x": _random((m, 64), dtype)} for m in (1, 6, 1)])


def test_one_row_transposed_product_needs_whole_vec4_rows() -> None:
    """K % 4 != 0: rows of b do not start on vec4s, so decode keeps matmul.wgsl."""
    model = _lm_head(k=30, n=50)
    assert _shaders(compile_model(model)) == ["matmul/matmul"]
    check_model(model, {"x": _random((1, 30))})
