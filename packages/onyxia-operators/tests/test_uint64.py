"""uint64 tensors against onnxruntime: stored as u32 on the GPU, as int64 is as i32.

Values below 2^32 compute exactly, as onnxruntime computes them; a value of 2^32 or more is refused
when it is fed (naming the input) or when a constant holds it (naming the tensor). Arithmetic that
could leave the u32 range (Add, Sub, Mul, a left BitShift, a Cast from a negative or large value ...) is checked
on the GPU: where onnxruntime holds a result past 2^32 - 1 (or wraps a negative one near 2^64),
`run()` raises a clear error naming the node instead of returning a wrapped value. Ops with no
checked form (ScatterElements' add reduction) refuse uint64 at compile time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from oracle import assert_close, check_op, compile_model, make_model, reference_outputs, runtime

from onyxia.core import InputError, PlanningError, UnsupportedOpError

U32_MAX = 2**32 - 1  # the largest value uint64 holds on the GPU


def _u64(*values: Any) -> np.ndarray:
    return np.array(values, np.uint64)


BIG = _u64([0, 1, 7, U32_MAX], [2**31, 123456789, U32_MAX - 1, 42])


@pytest.mark.parametrize(
    ("op", "inputs", "attrs"),
    [
        ("Identity", {"x": BIG}, {}),
        ("Add", {"a": _u64(U32_MAX - 5, 2**31, 3), "b": _u64(5, 2**31 - 1, 4)}, {}),
        ("Gather", {"x": BIG, "i": np.array([1, 0, 1], np.int64)}, {"axis": 0}),
        ("Concat", {"a": BIG, "b": _u64([5, 6, 7, U32_MAX])}, {"axis": 0}),
    ],
    ids=["Identity", "Add", "Gather", "Concat"],
)
def test_uint64_ops_match_onnxruntime(op: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any]) -> None:
    (out,) = check_op(op, inputs, attrs)
    assert out.dtype == np.uint64


@pytest.mark.parametrize(
    ("x", "to"),
    [
        (np.array([0.0, 1.9, 2**31, 4294967040.0, -0.5], np.float32), "UINT64"),
        (np.array([0, 5, 2**31 - 1], np.int32), "UINT64"),
        (_u64(0, 7, 2**31 - 1), "INT64"),
        (_u64(0, 7, U32_MAX, 2**24 + 1), "FLOAT"),
        (_u64(0, 7, U32_MAX, 2**31), "INT32"),  # onnxruntime wraps to 32 bits: -1, -2^31
    ],
    ids=["float-to-u64", "int32-to-u64", "u64-to-int64", "u64-to-float", "u64-to-int32"],
)
def test_cast_to_and_from_uint64_matches_onnxruntime(x: np.ndarray, to: str) -> None:
    from onnx import TensorProto

    check_op("Cast", {"x": x}, {"to": getattr(TensorProto, to)})


def test_a_fed_value_beyond_u32_is_refused_naming_the_input() -> None:
    executor = runtime().load_model(compile_model(make_model("Identity", {"x": BIG})))
    assert_close(executor.run({"x": BIG})["y0"], BIG)
    with pytest.raises(InputError, match=r"input 'x': uint64 values range over \[0, 4294967296\]; the GPU stores"):
        executor.run({"x": _u64([0, 1, 2, 3], [4, 5, 6, 2**32])})


def test_a_constant_beyond_u32_is_a_clear_compile_error() -> None:
    model = make_model("Add", {"a": _u64(2**40), "b": _u64(1)}, initializers=["a"])
    with pytest.raises(PlanningError, match=r"tensor 'a': uint64 value range \[1099511627776, 1099511627776\] is out"):
        compile_model(model)


# results onnxruntime holds in 64 bits (or wraps near 2^64) that u32 cannot: a clear run-time error
OVERFLOW: list[tuple[str, dict[str, np.ndarray], dict[str, Any]]] = [
    ("Add", {"a": _u64(U32_MAX, 3), "b": _u64(1, 4)}, {}),
    ("Cast", {"a": np.array([1.0, 5e9], np.float32)}, {"to": 13}),
    ("Cast", {"a": np.array([3, -1], np.int32)}, {"to": 13}),
    ("Cast", {"a": _u64(5, 2**31)}, {"to": 7}),  # int64 is carried as i32: its own check
    ("Mul", {"a": _u64(65536, 3), "b": _u64(65536, 4)}, {}),
    ("BitShift", {"a": _u64(3, 1), "b": _u64(31, 1)}, {"direction": "LEFT"}),
]


@pytest.mark.parametrize(("op", "feeds", "attrs"), OVERFLOW, ids=[f"{c[0]}-{i}" for i, c in enumerate(OVERFLOW)])
def test_results_beyond_u32_raise_where_onnxruntime_computes_them(
    op: str, feeds: dict[str, np.ndarray], attrs: dict[str, Any]
) -> None:
    model = make_model(op, feeds, attrs)
    expected = reference_outputs(model, feeds, "ort")[0]
    limit = 2**31 - 1 if expected.dtype == np.int64 else U32_MAX
    assert expected.astype(np.float64).max() > limit
    kind = "int64" if expected.dtype == np.int64 else "uint64"
    with pytest.raises(InputError, match=rf"node '{op}_0' \({op}\): {kind} value out of the 32-bit range Onyxia"):
        runtime().load_model(compile_model(model)).run(feeds)


def test_fused_uint64_chain_checks_its_members() -> None:
    """Sub then Add in one FusedElementwise: exact in range, and a Sub below 0 (onnxruntime wraps it
    to near 2^64) is reported naming the fused members."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Sub", ["a", "b"], ["d"], name="diff"), helper.make_node("Add", ["d", "b"], ["y"])]
    vis = [helper.make_tensor_value_info(n, TensorProto.UINT64, [2]) for n in "ab"]
    graph = helper.make_graph(nodes, "g", vis, [helper.make_tensor_value_info("y", TensorProto.UINT64, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    executor = runtime().load_model(compile_model(model))
    assert [op.op_type for op in executor.compiled.operations] == ["FusedElementwise"]
    fine = {"a": _u64(U32_MAX, 9), "b": _u64(5, 9)}
    assert_close(executor.run(fine)["y"], reference_outputs(model, fine, "ort")[0])
    with pytest.raises(InputError, match=r"\(FusedElementwise\), in members Sub 'diff', Add .*: uint64 value out"):
        executor.run({"a": _u64(1, 2), "b": _u64(2, 1)})
    assert_close(executor.run(fine)["y"], reference_outputs(model, fine, "ort")[0])


def test_scatter_add_of_uint64_is_refused_at_compile_time() -> None:
    """Its kernel has no checked uint64 sum: refused, rather than wrapped at 2^32."""
    inputs = {"x": _u64(1, 2, 3), "i": np.array([0, 0], np.int64), "u": _u64(U32_MAX, 1)}
    model = make_model("ScatterElements", inputs, {"reduction": "add"}, opset=18)
    with pytest.raises(UnsupportedOpError, match=r"\(ScatterElements\): data dtype uint64 is not implemented"):
        compile_model(model)


def test_int4_to_uint64_is_checked_in_the_4bit_kernel() -> None:
    """onnxruntime (fed the int4 values as an initializer: its Python API takes no int4 arrays) casts
    -1 to 2^64 - 1; Onyxia's 4-bit kernel reports it, and casts values in range exactly."""
    import ml_dtypes

    def ort(x: np.ndarray) -> np.ndarray:
        return reference_outputs(make_model("Cast", {"a": x}, {"to": 13}, initializers=["a"]), {}, "ort")[0]

    fine, negative = np.array([3, 7, 0], ml_dtypes.int4), np.array([3, -1, 0], ml_dtypes.int4)
    assert ort(negative).max() > U32_MAX
    executor = runtime().load_model(compile_model(make_model("Cast", {"a": fine}, {"to": 13})))
    assert_close(executor.run({"a": fine})["y0"], ort(fine))
    with pytest.raises(InputError, match=r"node 'Cast_0' \(Cast\): uint64 value out of the 32-bit range"):
        executor.run({"a": negative})


@pytest.mark.parametrize(
    ("op", "fine", "over", "const", "attrs"),
    [
        ("ReduceSum", _u64([2**31, 5], [2**31 - 1, 6]), _u64([2**31, 5], [2**31, 6]), "axes", {"keepdims": 0}),
        ("CumSum", _u64(2**31, 2**31 - 1, 0), _u64(2**31, 2**31 - 1, 1), "axis", {}),
    ],
    ids=["ReduceSum", "CumSum"],
)
def test_uint64_sums_are_exact_to_u32_max_and_checked_past_it(
    op: str, fine: np.ndarray, over: np.ndarray, const: str, attrs: dict[str, Any]
) -> None:
    """onnxruntime has no uint64 ReduceSum or CumSum kernel, so the ONNX reference is the oracle here:
    sums reaching 2^32 - 1 are exact, one past it is reported."""
    axis = np.array([0] if op == "ReduceSum" else 0, np.int64)
    model = make_model(op, {"a": fine, const: axis}, attrs, initializers=[const])
    executor = runtime().load_model(compile_model(model))
    assert_close(executor.run({"a": fine})["y0"], reference_outputs(model, {"a": fine}, "onnx")[0])
    assert reference_outputs(model, {"a": over}, "onnx")[0].max() > U32_MAX
    with pytest.raises(InputError, match=rf"node '{op}_0' \({op}\): uint64 value out of the 32-bit range"):
        executor.run({"a": over})
