"""int4/uint4 tensors against onnxruntime: Cast and CastLike into and out of 4 bits (packed on the GPU), as
graph inputs, outputs, intermediates and initializers, and the run() boundary for 4-bit arrays.

onnxruntime's Python API exchanges no 4-bit arrays ("No corresponding Numpy type for Tensor Type. Int4x2"), so
its side of each comparison reads a 4-bit value through a Cast to 8 bits, or holds it as an initializer, while
Onyxia's side takes and returns `ml_dtypes` 4-bit arrays directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import assert_close, compile_model, reference_outputs, runtime

from onyxia.core import DataType, InputError
from onyxia.core.nibbles import pack_4bit, to_4bit, unpack_4bit

RNG = np.random.default_rng(4)
FOUR = {"int4": (TensorProto.INT4, ml_dtypes.int4, np.int8), "uint4": (TensorProto.UINT4, ml_dtypes.uint4, np.uint8)}
WIDE = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.bool_): TensorProto.BOOL,
}


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[int, list[int]]],
    outputs: list[str],
    initializers: Sequence[onnx.TensorProto] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "int4",
        [helper.make_tensor_value_info(n, t, d) for n, (t, d) in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _onyxia(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    results = runtime().load_model(compile_model(model)).run(feeds)
    return [results[o.name] for o in model.graph.output]


def _values(dtype: np.dtype, n: int) -> np.ndarray:
    """Values exercising the wrap into 4 bits: beyond the range, halves (rounded away from zero), negatives."""
    if dtype.kind == "f":
        base = np.concatenate([np.arange(-20, 21) / 2, [7.6, -7.6, 8.49, 15.5, 100.0, -100.0, 0.49999997]])
        return RNG.permutation(np.resize(base, n)).astype(dtype)
    if dtype == np.bool_:
        return RNG.integers(0, 2, n).astype(bool)
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -300), min(info.max, 300), n).astype(dtype)


@pytest.mark.parametrize("four", list(FOUR))
@pytest.mark.parametrize("source", [np.float32, np.float16, np.int32, np.int64, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("n", [1, 13, 600])
def test_cast_into_4bit_matches_onnxruntime(four: str, source: type, n: int) -> None:
    """Onyxia's 4-bit output equals onnxruntime's value read back through a Cast to 8 bits, and a round trip
    through a 4-bit intermediate equals onnxruntime's on the same graph."""
    code, logical, plain = FOUR[four]
    x = _values(np.dtype(source), n)
    src = WIDE[np.dtype(source)]
    to_4 = helper.make_node("Cast", ["x"], ["y4"], to=code)
    back = helper.make_node("Cast", ["y4"], ["y8"], to=helper.np_dtype_to_tensor_dtype(np.dtype(plain)))
    chain = _model([to_4, back], {"x": (src, [n])}, ["y8"])
    (expected,) = reference_outputs(chain, {"x": x}, "ort")
    (got4,) = _onyxia(_model([to_4], {"x": (src, [n])}, ["y4"]), {"x": x})
    assert got4.dtype == np.dtype(logical)
    assert_close(got4.astype(plain), expected, "y4")
    (got8,) = _onyxia(chain, {"x": x})
    assert_close(got8, expected, "y8")


@pytest.mark.parametrize("four", list(FOUR))
@pytest.mark.parametrize("target", [np.float32, np.float16, np.int32, np.int64, np.int8, np.uint8, np.bool_])
def test_cast_out_of_4bit_matches_onnxruntime(four: str, target: type) -> None:
    """A 4-bit graph input (Onyxia) or initializer (onnxruntime, which takes no 4-bit feeds) cast to each type;
    CastLike too; and the initializer form in Onyxia, which unpacks the weight and folds on the host."""
    code, logical, _ = FOUR[four]
    lo, hi = (-8, 8) if code == TensorProto.INT4 else (0, 16)
    x = RNG.integers(lo, hi, (3, 7)).astype(logical)
    to = WIDE[np.dtype(target)]
    like = np.zeros((1,), target)
    nodes = [
        helper.make_node("Cast", ["x"], ["y"], to=to),
        helper.make_node("CastLike", ["x", "like"], ["z"]),
        helper.make_node("Identity", ["g"], ["g_out"]),  # a float input, so neither side folds the whole graph
    ]
    g = RNG.standard_normal(2).astype(np.float32)
    tensors = [numpy_helper.from_array(x, "x"), numpy_helper.from_array(like, "like")]
    as_initializer = _model(nodes, {"g": (TensorProto.FLOAT, [2])}, ["y", "z", "g_out"], tensors)
    expected = reference_outputs(as_initializer, {"g": g}, "ort")
    as_input = _model(nodes, {"x": (code, [3, 7]), "g": (TensorProto.FLOAT, [2])}, ["y", "z", "g_out"], tensors[1:])
    for got in (_onyxia(as_input, {"x": x, "g": g}), _onyxia(as_initializer, {"g": g})):
        for name, a, e in zip(("y", "z", "g_out"), got, expected):
            assert_close(a, e, name, tolerance=(0.0, 0.0))


def test_4bit_identity_keeps_packing_across_odd_counts() -> None:
    """A 4-bit input passes through a 4-bit -> 4-bit cast unchanged (int4 -> uint4 keeps the bits), at
    element counts that end mid-byte and mid-word."""
    for n in (1, 2, 7, 8, 9, 17):
        x = RNG.integers(-8, 8, n).astype(ml_dtypes.int4)
        model = _model(
            [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT4)], {"x": (TensorProto.INT4, [n])}, ["y"]
        )
        (got,) = _onyxia(model, {"x": x})
        np.testing.assert_array_equal(got.astype(np.int16), x.astype(np.int8).astype(np.int16) & 0xF)


def test_4bit_inputs_take_plain_bytes_in_range_and_refuse_the_rest() -> None:
    model = _model(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], {"x": (TensorProto.INT4, [4])}, ["y"]
    )
    executor = runtime().load_model(compile_model(model))
    got = executor.run({"x": np.array([-8, -1, 0, 7], np.int8)})["y"]
    np.testing.assert_array_equal(got, np.array([-8, -1, 0, 7], np.float32))
    with pytest.raises(InputError, match=r"input 'x': values range over \[-9, 7\]; INT4 holds \[-8, 7\]"):
        executor.run({"x": np.array([-9, -1, 0, 7], np.int8)})
    with pytest.raises(InputError, match=r"input 'x': dtype is int32; expected ml_dtypes.int4 \(or int8\)"):
        executor.run({"x": np.array([1, 2, 3, 4], np.int32)})


def test_constant_cast_into_4bit_folds_like_the_kernel() -> None:
    """A Cast of a constant folds on the host (`onyxia.core.nibbles.to_4bit`); its packed value feeds a GPU step."""
    c = _values(np.dtype(np.float32), 21)
    g = RNG.standard_normal(21).astype(np.float32)
    nodes = [
        helper.make_node("Cast", ["c"], ["c4"], to=TensorProto.INT4),
        helper.make_node("Cast", ["c4"], ["cf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["cf", "g"], ["y"]),
    ]
    model = _model(nodes, {"g": (TensorProto.FLOAT, [21])}, ["y"], [numpy_helper.from_array(c, "c")])
    (expected,) = reference_outputs(model, {"g": g}, "ort")
    (got,) = _onyxia(model, {"g": g})
    assert_close(got, expected, "y")


@pytest.mark.parametrize("four", list(FOUR))
def test_host_packing_and_casts_match_onnx_and_onnxruntime(four: str) -> None:
    """`onyxia.core.nibbles` (folding, uploads, readback) against onnx's own packing and onnxruntime's Cast."""
    code, logical, plain = FOUR[four]
    dtype = DataType(code)
    for n in (0, 1, 2, 7, 16, 33):
        values = RNG.integers(-8 if dtype is DataType.INT4 else 0, 8 if dtype is DataType.INT4 else 16, n)
        packed = np.frombuffer(numpy_helper.from_array(values.astype(logical), "v").raw_data, np.uint8)
        np.testing.assert_array_equal(pack_4bit(values), packed)
        np.testing.assert_array_equal(unpack_4bit(packed, dtype, (n,)), values.astype(plain))
    x = _values(np.dtype(np.float32), 400)
    chain = _model(
        [helper.make_node("Cast", ["x"], ["m"], to=code), helper.make_node("Cast", ["m"], ["y"], to=TensorProto.INT32)],
        {"x": (TensorProto.FLOAT, [400])},
        ["y"],
    )
    (expected,) = reference_outputs(chain, {"x": x}, "ort")
    np.testing.assert_array_equal(to_4bit(x, dtype).astype(np.int32), expected)


@pytest.mark.parametrize("four", list(FOUR))
def test_4bit_graph_input_feeds_gather_block_quantized(four: str) -> None:
    """A run-time int4/uint4 input reaches com.microsoft GatherBlockQuantized packed, as its initializer form does
    (onnxruntime, which takes no 4-bit feeds, holds the table as an initializer)."""
    code, logical, _ = FOUR[four]
    lo, hi = (-8, 8) if code == TensorProto.INT4 else (0, 16)
    data = RNG.integers(lo, hi, (9, 64)).astype(logical)
    scales = numpy_helper.from_array((RNG.random((9, 2)) + 0.5).astype(np.float32), "scales")
    indices = np.array([[4, 0, 8]], np.int64)
    node = helper.make_node(
        "GatherBlockQuantized",
        ["data", "indices", "scales"],
        ["y"],
        domain="com.microsoft",
        gather_axis=0,
        quantize_axis=1,
        block_size=32,
        bits=4,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    index_input = {"indices": (TensorProto.INT64, [1, 3])}
    table = _model([node], index_input, ["y"], [scales, numpy_helper.from_array(data, "data")])
    fed = _model([node], {**index_input, "data": (code, [9, 64])}, ["y"], [scales])
    for model in (table, fed):
        del model.opset_import[:]
        model.opset_import.extend(opsets)
    (expected,) = reference_outputs(table, {"indices": indices}, "ort")
    (got,) = _onyxia(fed, {"indices": indices, "data": data})
    assert_close(got, expected, "y")
