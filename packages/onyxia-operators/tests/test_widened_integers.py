"""8/16-bit integers live widened in 32 bits on the GPU (`onyxia.operators.elementwise.widened`): a result
written in such a type is narrowed to its width, so a consumer on the GPU reads the value ONNX means.

A one-node model cannot show a missing mask (reading back wraps the 32-bit value), so each case feeds the
result to a comparison on the GPU as well, alone and fused (`FuseElementwise` takes the chain when the
intermediate is not a graph output), against onnxruntime. BitwiseNot is the row that needs the mask most."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, check_op, compile_model

from onyxia.core import UnsupportedOpError

# values at the ends of each type's range: where a 32-bit result leaves the narrow one
EXTREMES = {
    np.uint8: [0, 1, 5, 127, 128, 250, 255],
    np.int8: [-128, -127, -1, 0, 1, 100, 127],
    np.uint16: [0, 1, 255, 256, 40000, 65534, 65535],
    np.int16: [-32768, -32767, -1, 0, 1, 30000, 32767],
    np.uint32: [0, 1, 255, 65535, 2**31, 2**32 - 2, 2**32 - 1],
    np.int32: [-(2**31), -1, 0, 1, 255, 2**31 - 2, 2**31 - 1],
    np.int64: [-(2**31), -1, 0, 1, 255, 2**31 - 2, 2**31 - 1],  # stored as i32: values in its range
}


@pytest.mark.parametrize("dtype", list(EXTREMES), ids=lambda d: np.dtype(d).name)
def test_bitwise_not_at_the_ends_of_each_range(dtype: type) -> None:
    check_op("BitwiseNot", {"x": np.array(EXTREMES[dtype], dtype)}, opset=18)


def _chain(op: str, dtype: type, arity: int, *, expose: bool) -> tuple[object, dict[str, np.ndarray]]:
    """y = op(x[, w]); big = y > threshold (on the GPU). With `expose`, y is an output too (not fused)."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    values = np.array(EXTREMES[dtype], dtype)
    feeds = {"x": values, "w": np.roll(values, 2)}  # 1 + 255 (uint8), -1 + -128 (int8): past the range
    names = ["x", "w"][:arity]
    threshold = numpy_helper.from_array(np.array([100], dtype), "threshold")
    nodes = [helper.make_node(op, names, ["y"]), helper.make_node("Greater", ["y", "threshold"], ["big"])]
    outputs = [helper.make_tensor_value_info("big", TensorProto.BOOL, [len(values)])]
    if expose:
        outputs.append(helper.make_tensor_value_info("y", elem, [len(values)]))
    inputs = [helper.make_tensor_value_info(n, elem, [len(values)]) for n in names]
    graph = helper.make_graph(nodes, f"{op}_chain", inputs, outputs, [threshold])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 9
    return model, {n: feeds[n] for n in names}


CHAINS = [
    ("BitwiseNot", np.uint8, 1),
    ("BitwiseNot", np.uint16, 1),
    ("Add", np.uint8, 2),
    ("Sub", np.uint8, 2),
    ("Mul", np.uint16, 2),
    ("Add", np.int8, 2),
    ("Neg", np.int8, 1),
    ("Abs", np.int8, 1),
]


@pytest.mark.parametrize("expose", [True, False], ids=["alone", "fused"])
@pytest.mark.parametrize(("op", "dtype", "arity"), CHAINS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_consumer_on_the_gpu_reads_the_narrow_value(op: str, dtype: type, arity: int, expose: bool) -> None:
    model, feeds = _chain(op, dtype, arity, expose=expose)
    check_model(model, feeds)
    fused = any(planned.op_type == "FusedElementwise" for planned in compile_model(model).operations)
    assert fused != expose, "the chain runs fused exactly when its intermediate is not an output"


def test_bitwise_not_of_uint64_is_refused_at_compile_time() -> None:
    """uint64 is stored as u32: ~x of a value below 2^32 is at least 2^64 - 2^32, which that storage cannot hold."""
    with pytest.raises(UnsupportedOpError, match=r"\(BitwiseNot\): input dtype uint64 is not implemented"):
        check_op("BitwiseNot", {"x": np.array([1, 2], np.uint64)}, opset=18)
