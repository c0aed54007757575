"""com.microsoft GatherBlockQuantized (4-bit) against onnxruntime's CPU kernel, and on the genai int4 Gemma."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, check_op, compile_model, make_model, onyxia_outputs

from onyxia.core import (
    FOLD_ELEMENT_LIMIT,
    DataType,
    Dispatch,
    ShapeInferenceError,
    TensorRole,
    TensorValue,
    UnsupportedOpError,
)

FIXTURE = Path(__file__).parent / "data" / "gemma3-tiny-genai-int4" / "model.onnx"


def _pack(q: np.ndarray) -> np.ndarray:
    """uint8 nibbles, two per byte along the last axis, low nibble first (MatMulNBits' layout)."""
    return q[..., 0::2] | (q[..., 1::2] << 4)


def _uint8_inputs(rows: int, cols: int, block_size: int, dtype: type, zero_points: bool, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    blocks = -(-cols // block_size)
    inputs = {
        "data": _pack(rng.integers(0, 16, size=(rows, cols), dtype=np.uint8)),
        "indices": np.array([[0, rows - 1, -1, 3], [2, 2, -rows, 1]], np.int64),
        "scales": (rng.random((rows, blocks)) + 0.5).astype(dtype),
    }
    if zero_points:
        z = rng.integers(0, 16, size=(rows, blocks + blocks % 2), dtype=np.uint8)
        inputs["zero_points"] = _pack(z)
    return inputs


@pytest.mark.parametrize("zero_points", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("block_size", [16, 32, 128])
def test_uint8_data(block_size: int, dtype: type, zero_points: bool) -> None:
    # 96 columns: 128-blocks are padded, 16-blocks give an odd count of zero-point nibbles
    inputs = _uint8_inputs(11, 96 if block_size != 32 else 160, block_size, dtype, zero_points)
    attrs = {"gather_axis": 0, "quantize_axis": 1, "block_size": block_size, "bits": 4}
    initializers = [k for k in inputs if k != "indices"]
    check_op("GatherBlockQuantized", inputs, attrs, domain="com.microsoft", initializers=initializers)


def test_runtime_uint8_data_and_symbolic_indices() -> None:
    inputs = _uint8_inputs(9, 64, 32, np.float32, True)
    inputs["indices"] = np.array([[4, 0, 8]], np.int32)
    attrs = {"gather_axis": 0, "quantize_axis": 1, "block_size": 32, "bits": 4}
    check_op(
        "GatherBlockQuantized",
        inputs,
        attrs,
        domain="com.microsoft",
        initializers=["scales"],
        dim_params={"indices": ["batch", "seq"]},
    )


def test_out_of_range_index_gives_zeros() -> None:
    inputs = _uint8_inputs(5, 32, 16, np.float32, False)
    inputs["indices"] = np.array([1, 5, -6], np.int64)
    (y,) = check_op(
        "GatherBlockQuantized",
        inputs,
        {"block_size": 16},
        domain="com.microsoft",
        initializers=["data", "scales"],
    )
    assert not y[1:].any()


def _int4_model(
    dtype: int, values: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, **attrs: int
) -> onnx.ModelProto:
    initializers = [
        helper.make_tensor("data", dtype, values.shape, values.flatten().tolist()),
        numpy_helper.from_array(scales, "scales"),
    ]
    names = ["data", "indices", "scales"]
    if zero_points is not None:
        initializers.append(helper.make_tensor("zero_points", dtype, zero_points.shape, zero_points.flatten().tolist()))
        names.append("zero_points")
    node = helper.make_node("GatherBlockQuantized", names, ["y"], domain="com.microsoft", bits=4, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("indices", TensorProto.INT64, ["n"])],
        [helper.make_empty_tensor_value_info("y")],
        initializers,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


@pytest.mark.parametrize(
    ("gather_axis", "quantize_axis"),
    [(1, 2), (0, 2), (2, 0), (1, 1)],  # any axes for INT4/UINT4, the gathered one included
)
@pytest.mark.parametrize("signed", [True, False])
def test_int4_data_any_axes(signed: bool, gather_axis: int, quantize_axis: int) -> None:
    rng = np.random.default_rng(gather_axis * 3 + quantize_axis)
    low, dtype = (-8, TensorProto.INT4) if signed else (0, TensorProto.UINT4)
    values = rng.integers(low, low + 16, size=(3, 5, 48))
    block_dims = list(values.shape)
    block_dims[quantize_axis] = -(-block_dims[quantize_axis] // 16)
    scales = (rng.random(block_dims) + 0.5).astype(np.float32)
    zero_points = rng.integers(low, low + 16, size=block_dims)
    for zp in (None, zero_points):
        model = _int4_model(
            dtype, values, scales, zp, gather_axis=gather_axis, quantize_axis=quantize_axis, block_size=16
        )
        check_model(model, {"indices": np.array([2, 0, -1], np.int64)})


def test_unsupported_bits_and_bad_axes() -> None:
    inputs = _uint8_inputs(4, 32, 16, np.float32, False)

    def compile_with(attrs: dict) -> None:
        model = make_model(
            "GatherBlockQuantized", inputs, attrs, domain="com.microsoft", initializers=["data", "scales"]
        )
        onyxia_outputs(model, {"indices": inputs["indices"]})

    with pytest.raises(UnsupportedOpError, match=r"\(GatherBlockQuantized.*attribute 'bits' = 8"):
        compile_with({"bits": 8, "block_size": 16})
    with pytest.raises(ShapeInferenceError, match="uint8 data needs gather_axis 0 and quantize_axis 1"):
        compile_with({"gather_axis": 1, "quantize_axis": 0, "block_size": 16})


def test_genai_int4_tied_embedding() -> None:
    """The fixture's real attributes and weights: the LM head's Q4 weight Reshaped to [1024, 32] bytes."""
    model = onnx.load(FIXTURE, load_external_data=False)
    tensors = {t.name: t for t in model.graph.initializer}
    node = next(n for n in model.graph.node if n.op_type == "GatherBlockQuantized")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    weight = numpy_helper.to_array(tensors["lm_head.MatMul.weight_Q4"], base_dir=str(FIXTURE.parent))
    scales = numpy_helper.to_array(tensors[node.input[2]], base_dir=str(FIXTURE.parent))
    inputs = {
        "data": weight.reshape(1024, 32),
        "indices": np.array([[2, 5, 1023, 6, 0, 17]], np.int64),
        "scales": scales,
    }
    check_op("GatherBlockQuantized", inputs, attrs, domain="com.microsoft", initializers=["data", "scales"])


def test_reshaped_large_uint8_initializer_folds_lazily() -> None:
    """The genai builder's tied embedding: Reshape([N, K/32, 16] uint8 lm head weight, [N, K/2]) feeding the
    gather, over the fold element limit. The Reshape folds into a lazy initializer (nothing read at compile
    time), so the gather binds the packed bytes as u32 words rather than a run-time tensor of one byte per u32."""
    rows, cols = 4160, 512  # 4160 x 256 bytes: just over FOLD_ELEMENT_LIMIT
    inputs = _uint8_inputs(rows, cols, 32, np.float32, False, seed=3)
    assert inputs["data"].size > FOLD_ELEMENT_LIMIT
    weight = inputs["data"].reshape(rows, cols // 32, 16)
    nodes = [
        helper.make_node("Reshape", ["weight_Q4", "packed_shape"], ["packed"]),
        helper.make_node(
            "GatherBlockQuantized", ["packed", "indices", "scales"], ["y"], domain="com.microsoft", block_size=32
        ),
    ]
    initializers = [
        numpy_helper.from_array(weight, "weight_Q4"),
        numpy_helper.from_array(np.array([rows, cols // 2], np.int64), "packed_shape"),
        numpy_helper.from_array(inputs["scales"], "scales"),
    ]
    graph = helper.make_graph(
        nodes,
        "tied",
        [helper.make_tensor_value_info("indices", TensorProto.INT64, [2, 4])],
        [helper.make_empty_tensor_value_info("y")],
        initializers,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)

    plan = compile_model(model)
    assert [op.op_type for op in plan.operations] == ["GatherBlockQuantized"]  # the Reshape emits no step
    (step,) = [s for s in plan.operations[0].steps if isinstance(s, Dispatch)]
    data = plan.tensors[step.bindings[0].buffer.tensor]
    assert data.role is TensorRole.WEIGHT and data.dtype == DataType.UINT32
    assert data.numel == inputs["data"].size // 4  # the packed bytes, 4 to a word
    assert isinstance(data.data, TensorValue) and not data.data.is_loaded
    assert not any(t.dtype == DataType.UINT8 and t.numel == inputs["data"].size for t in plan.tensors.values())
    check_model(model, {"indices": inputs["indices"]})
