"""GatherBlockQuantized over a table past the storage-binding limit, in row ranges (data, scales and zero
points chunked together), against onnxruntime's CPU kernel. The planning limit is lowered so small tables
split into several ranges; the runtime still checks every range against the adapter."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from oracle import check_model, check_op, compile_model, make_model
from test_gather_block_quantized_ort import _int4_model, _uint8_inputs

from onyxia.core import BINDING_ALIGNMENT, CompiledModel, Dispatch, binding_limit

LIMIT = 16 << 10  # a uint8 zero-point row is 3 bytes here: ranges of 256 rows keep it aligned


def _ranges(plan: CompiledModel, limit: int) -> int:
    """Assert every binding is within `limit` and aligned; the GatherBlockQuantized dispatch count."""
    (op,) = [op for op in plan.operations if op.op_type == "GatherBlockQuantized"]
    dispatches = [s for s in op.steps if isinstance(s, Dispatch)]
    for step in dispatches:
        for b in step.bindings:
            size = b.size if b.size is not None else plan.tensors[b.buffer.tensor].nbytes - b.offset
            if not isinstance(size, int):
                continue  # symbolic indices and output: a few ids, never split
            assert isinstance(b.offset, int) and b.offset % BINDING_ALIGNMENT == 0, b
            assert size <= limit, b
    return len(dispatches)


def _indices(rows: int) -> np.ndarray:
    """Rows of every range, both edges, negatives and one out of range (onnxruntime: a row of zeros)."""
    return np.array([[0, rows - 1, -1, rows // 2, rows // 3], [2, rows, -rows, 1, rows // 2 + 1]], np.int64)


@pytest.mark.parametrize("zero_points", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("block_size", [16, 32])
def test_uint8_table_in_row_ranges(block_size: int, dtype: type, zero_points: bool) -> None:
    inputs = _uint8_inputs(2000, 96, block_size, dtype, zero_points)  # 96 KB of u32 words + scales
    inputs["indices"] = _indices(2000)
    attrs = {"gather_axis": 0, "quantize_axis": 1, "block_size": block_size, "bits": 4}
    initializers = [k for k in inputs if k != "indices"]
    model = make_model("GatherBlockQuantized", inputs, attrs, domain="com.microsoft", initializers=initializers)
    with binding_limit(LIMIT):
        assert _ranges(compile_model(model), LIMIT) >= 4
        check_op("GatherBlockQuantized", inputs, attrs, domain="com.microsoft", initializers=initializers)


def test_runtime_uint8_table_in_row_ranges() -> None:
    """Data known only at run time (the genai builder's Reshape of the lm head weight): one byte per u32."""
    inputs = _uint8_inputs(1000, 64, 16, np.float32, True)  # zero points: 2 bytes a row
    inputs["indices"] = _indices(1000)
    attrs = {"gather_axis": 0, "quantize_axis": 1, "block_size": 16, "bits": 4}
    model = make_model(
        "GatherBlockQuantized", inputs, attrs, domain="com.microsoft", initializers=["scales", "zero_points"]
    )
    with binding_limit(LIMIT):
        assert _ranges(compile_model(model), LIMIT) >= 6
        check_op(
            "GatherBlockQuantized",
            inputs,
            attrs,
            domain="com.microsoft",
            initializers=["scales", "zero_points"],
        )


@pytest.mark.parametrize("quantize_axis", [1, 2])
@pytest.mark.parametrize("signed", [True, False])
def test_int4_table_in_row_ranges(signed: bool, quantize_axis: int) -> None:
    rng = np.random.default_rng(quantize_axis + 2 * signed)
    low, dtype = (-8, TensorProto.INT4) if signed else (0, TensorProto.UINT4)
    values = rng.integers(low, low + 16, size=(400, 4, 32))
    block_dims = list(values.shape)
    block_dims[quantize_axis] = -(-block_dims[quantize_axis] // 16)
    scales = (rng.random(block_dims) + 0.5).astype(np.float32)
    zero_points = rng.integers(low, low + 16, size=block_dims)
    model = _int4_model(dtype, values, scales, zero_points, gather_axis=0, quantize_axis=quantize_axis, block_size=16)
    with binding_limit(LIMIT):
        assert _ranges(compile_model(model), LIMIT) >= 2  # 25.6 KB of data
        check_model(model, {"indices": _indices(400)[0]})


def test_table_under_the_limit_is_one_dispatch() -> None:
    inputs = _uint8_inputs(300, 96, 32, np.float32, True)
    attrs = {"gather_axis": 0, "quantize_axis": 1, "block_size": 32, "bits": 4}
    model = make_model("GatherBlockQuantized", inputs, attrs, domain="com.microsoft", initializers=["data", "scales"])
    assert _ranges(compile_model(model), 1 << 20) == 1
