"""Run-time checks against onnxruntime on the same model: out-of-range indices and int64 overflow.

Where onnxruntime refuses an index, Onyxia's kernel reports it through the plan's error word and
`run()` raises an `InputError` naming node, op and index; where it wraps (a negative index, once) or
ignores (OneHot), Onyxia computes the same values. int64 results outside i32 (onnxruntime computes
them exactly) raise the clear error instead of a wrapped value. The error word rides on the output
readback: one map per run, a few bytes more, and it is cleared so the next run starts clean.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from oracle import assert_close, compile_model, make_model, reference_outputs, runtime

from onyxia.core import InputError, PlanningError
from onyxia.core.plan import ERROR_SLOT_WORDS

I64_MAX, I64_MIN = 2**31 - 1, -(2**31)  # the i32 range int64 is carried in on the GPU
DATA = np.arange(24, dtype=np.float32).reshape(4, 6)
ONES = np.ones((1, 6), np.float32)


def _i64(*values: Any) -> np.ndarray:
    return np.array(values, np.int64)


def _run(model: Any, feeds: dict[str, np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    executor = runtime().load_model(compile_model(model))
    return executor, executor.run(feeds)


# op, inputs (all fed at run time), attrs, the bad index; onnxruntime refuses each
OUT_OF_RANGE: list[tuple[str, dict[str, np.ndarray], dict[str, Any], int]] = [
    ("Gather", {"x": DATA, "i": _i64(1, 5000)}, {"axis": 0}, 5000),
    ("Gather", {"x": DATA, "i": _i64(-5)}, {"axis": 0}, -5),
    ("Gather", {"x": DATA, "i": _i64([0, 6])}, {"axis": 1}, 6),
    ("GatherElements", {"x": DATA, "i": _i64([0, 1, 9, 0, 0, 0])}, {"axis": 0}, 9),
    ("GatherND", {"x": DATA, "i": _i64([1], [4])}, {}, 4),
    ("GatherND", {"x": DATA, "i": _i64([1, -7])}, {}, -7),
    ("ScatterND", {"x": DATA, "i": _i64([4]), "u": ONES}, {}, 4),
    ("ScatterND", {"x": DATA, "i": _i64([-5]), "u": ONES}, {"reduction": "add"}, -5),
    ("ScatterElements", {"x": DATA, "i": _i64([0, 0, 0, 0, 0, 4]), "u": ONES}, {"axis": 0}, 4),
]


@pytest.mark.parametrize(("op", "feeds", "attrs", "bad"), OUT_OF_RANGE, ids=[f"{c[0]}-{c[3]}" for c in OUT_OF_RANGE])
def test_out_of_range_index_raises_where_onnxruntime_does(
    op: str, feeds: dict[str, np.ndarray], attrs: dict[str, Any], bad: int
) -> None:
    model = make_model(op, feeds, attrs)
    with pytest.raises(Exception, match="(?i)out of|invalid ind"):
        reference_outputs(model, feeds, "ort")
    executor = runtime().load_model(compile_model(model))
    with pytest.raises(InputError, match=rf"node '{op}_0' \({op}\): index {bad} is out of range"):
        executor.run(feeds)
    # the word was cleared: the same executor computes a valid feed as onnxruntime does
    good = {k: (np.zeros_like(v) if k == "i" else v) for k, v in feeds.items()}
    expected = reference_outputs(model, good, "ort")
    assert_close(executor.run(good)["y0"], expected[0])


NEGATIVE: list[tuple[str, dict[str, np.ndarray], dict[str, Any]]] = [
    ("Gather", {"x": DATA, "i": _i64(-1, -4, 2)}, {"axis": 0}),
    ("Gather", {"x": DATA, "i": _i64([-6, 5])}, {"axis": 1}),
    ("GatherElements", {"x": DATA, "i": _i64([-1, -2, -3, -4, 0, 3])}, {"axis": 0}),
    ("GatherND", {"x": DATA, "i": _i64([-1, -6], [0, 5])}, {}),
    ("ScatterND", {"x": DATA, "i": _i64([-1]), "u": ONES}, {}),
    ("ScatterElements", {"x": DATA, "i": _i64([-1, -2, 0, 1, 2, 3]), "u": ONES}, {"axis": 0}),
]


@pytest.mark.parametrize(("op", "feeds", "attrs"), NEGATIVE, ids=[c[0] for c in NEGATIVE])
def test_negative_indices_wrap_once_as_in_onnxruntime(op: str, feeds: dict[str, np.ndarray], attrs: dict) -> None:
    model = make_model(op, feeds, attrs)
    _, got = _run(model, feeds)
    assert_close(got["y0"], reference_outputs(model, feeds, "ort")[0])


def test_one_hot_out_of_range_gives_an_all_off_line_as_in_onnxruntime() -> None:
    inputs = {"i": _i64(5, -1, -7, 2), "depth": _i64(3), "values": np.array([0.5, 2.0], np.float32)}
    model = make_model("OneHot", inputs, initializers=["depth"])
    executor, got = _run(model, {"i": inputs["i"], "values": inputs["values"]})
    assert_close(got["y0"], reference_outputs(model, {"i": inputs["i"], "values": inputs["values"]}, "ort")[0])
    assert executor.compiled.error_slots == []  # nothing to report: OneHot never fails on an index


# op, fed inputs, attrs, initializers: onnxruntime's exact result leaves the i32 range
OVERFLOW: list[tuple[str, dict[str, np.ndarray], dict[str, Any], tuple[str, ...]]] = [
    ("Add", {"a": _i64(I64_MAX, 1), "b": _i64(1, 1)}, {}, ()),
    ("Sub", {"a": _i64(I64_MIN + 1, 0), "b": _i64(2, 1)}, {}, ()),
    ("Mul", {"a": _i64(2**20), "b": _i64(2**20)}, {}, ()),
    ("Mul", {"a": _i64(-1), "b": _i64(I64_MIN)}, {}, ()),
    ("Neg", {"a": _i64(3, I64_MIN)}, {}, ()),
    ("Abs", {"a": _i64(I64_MIN)}, {}, ()),
    ("ReduceSum", {"a": _i64(2**30, 2**30, 5)}, {"keepdims": 0}, ()),
    ("ReduceProd", {"a": _i64(65536, 65536)}, {"keepdims": 0}, ()),
    ("CumSum", {"a": _i64(2**30, 2**30), "axis": _i64(0).reshape(())}, {}, ("axis",)),
    ("Cast", {"a": np.array([1.0, 3e9], np.float32)}, {"to": 7}, ()),
    ("Cast", {"a": np.array([-3e9], np.float32)}, {"to": 7}, ()),
    ("Cast", {"a": np.array([3_000_000_000], np.uint32)}, {"to": 7}, ()),
]


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "inits"), OVERFLOW, ids=[f"{c[0]}-{i}" for i, c in enumerate(OVERFLOW)]
)
def test_int64_overflow_raises_where_onnxruntime_computes_exactly(
    op: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any], inits: tuple[str, ...]
) -> None:
    model = make_model(op, inputs, attrs, initializers=inits)
    feeds = {k: v for k, v in inputs.items() if k not in inits}
    expected = reference_outputs(model, feeds, "ort")[0]
    assert expected.dtype == np.int64 and (expected.max() > I64_MAX or expected.min() < I64_MIN)
    executor = runtime().load_model(compile_model(model))
    with pytest.raises(InputError, match=rf"node '{op}_0' \({op}\): int64 value out of the 32-bit range Onyxia"):
        executor.run(feeds)


# results at the edges of the i32 range: exact, no false alarm
IN_RANGE: list[tuple[str, dict[str, np.ndarray], dict[str, Any]]] = [
    ("Add", {"a": _i64(I64_MAX - 1, I64_MIN + 1), "b": _i64(1, -1)}, {}),
    ("Sub", {"a": _i64(I64_MIN + 1, I64_MAX - 1), "b": _i64(1, -1)}, {}),
    ("Mul", {"a": _i64(-46341, 65536, -1, 0), "b": _i64(46340, -32768, I64_MAX, I64_MIN)}, {}),
    ("Neg", {"a": _i64(I64_MAX, -I64_MAX, 0)}, {}),
    ("ReduceSum", {"a": _i64(2**30, 2**30 - 1, -5, 4)}, {"keepdims": 0}),
    ("Cast", {"a": np.array([-2147483648.0, 2147483520.0, -2.7], np.float32)}, {"to": 7}),
]


@pytest.mark.parametrize(("op", "feeds", "attrs"), IN_RANGE, ids=[c[0] for c in IN_RANGE])
def test_int64_results_at_the_range_edges_are_exact(op: str, feeds: dict[str, np.ndarray], attrs: dict) -> None:
    model = make_model(op, feeds, attrs)
    _, got = _run(model, feeds)
    assert_close(got["y0"], reference_outputs(model, feeds, "ort")[0])


def test_fused_int64_chain_names_its_checked_members() -> None:
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Mul", ["a", "b"], ["m"], name="scale"), helper.make_node("Add", ["m", "b"], ["y"])]
    vis = [helper.make_tensor_value_info(n, TensorProto.INT64, [2]) for n in "ab"]
    graph = helper.make_graph(nodes, "g", vis, [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    executor = runtime().load_model(compile_model(model))
    assert [op.op_type for op in executor.compiled.operations] == ["FusedElementwise"]
    fine = {"a": _i64(3, -7), "b": _i64(5, 6)}
    assert_close(executor.run(fine)["y"], reference_outputs(model, fine, "ort")[0])
    with pytest.raises(InputError, match=r"\(FusedElementwise\), in members Mul 'scale', Add .*: int64 value out"):
        executor.run({"a": _i64(3, 2**16), "b": _i64(5, 2**16)})
    assert_close(executor.run(fine)["y"], reference_outputs(model, fine, "ort")[0])


def test_host_folding_beyond_i32_is_a_clear_compile_error() -> None:
    model = make_model("Add", {"a": _i64(I64_MAX), "b": _i64(1)}, initializers=["a", "b"])
    with pytest.raises(PlanningError, match=r"int64 value range \[2147483648, 2147483648\] is out of the 32-bit"):
        compile_model(model)


def test_error_word_rides_on_the_output_readback() -> None:
    """One map per run, the word's bytes behind the outputs; a run that reads nothing back keeps the
    report until the next run that does; identical nodes share one shader (the slot is an immediate)."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Gather", ["x", "i"], ["g1"]), helper.make_node("Gather", ["x", "j"], ["g2"])]
    vis = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])]
    vis += [helper.make_tensor_value_info(n, TensorProto.INT64, [2]) for n in "ij"]
    outs = [helper.make_empty_tensor_value_info(n) for n in ("g1", "g2")]
    model = helper.make_model(helper.make_graph(nodes, "g", vis, outs), opset_imports=[helper.make_opsetid("", 17)])
    executor = runtime().load_model(compile_model(model))
    compiled = executor.compiled
    assert [s.op_type for s in compiled.error_slots] == ["Gather", "Gather"]
    assert len({s.shader_index for op in compiled.operations for s in op.steps}) == 1
    stats = executor.stats
    feeds = {"x": DATA, "i": _i64(0, 3), "j": _i64(-1, 2)}
    maps, read, word = stats.staging_maps, stats.bytes_read_back, stats.error_word_bytes
    executor.run(feeds, outputs=["g1"])
    assert stats.staging_maps - maps == 1
    assert stats.bytes_read_back - read == 2 * 6 * 4  # g1
    assert stats.error_word_bytes - word == 2 * ERROR_SLOT_WORDS * 4  # then the word (2 slots), same map
    bad = {**feeds, "j": _i64(0, 4)}
    executor.run(bad, outputs=[])  # nothing read back: no map, the report waits in the word
    assert stats.staging_maps - maps == 1
    with pytest.raises(InputError, match=r"node 'Gather_1' \(Gather\): index 4 is out of range for axis 0 of size 4"):
        executor.run(feeds)
    assert_close(executor.run(feeds)["g2"], DATA[[3, 2]])
