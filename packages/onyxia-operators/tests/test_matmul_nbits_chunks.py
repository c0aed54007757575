"""MatMulNBits with a weight over the storage-binding limit, in ranges of output columns (B, scales, zero
points and bias chunked together by panels), against onnxruntime's CPU kernel. The planning limit is
lowered so small weights split into several ranges; the runtime still checks every range against the adapter."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_op, compile_model, make_model
from test_matmulnbits_ort import F32_TOLERANCE, INT8_TOLERANCE, quantized_weights

from onyxia.core import BINDING_ALIGNMENT, CompiledModel, Dispatch, PlanningError, binding_limit

LIMIT = 24 << 10  # K 160: B is 5 KiB a panel of 64 columns (20 KiB widened), so N 1000 is 4+ ranges


def _inputs(m: int, k: int, n: int, zero_points: str, dtype: type, bias: bool) -> dict[str, np.ndarray | None]:
    a = np.random.default_rng(m + k + n).standard_normal((m, k)).astype(dtype)
    inputs: dict[str, np.ndarray | None] = {"A": a, **quantized_weights(k, n, 32, zero_points, dtype, seed=n)}
    if bias:
        inputs.setdefault("zero_points", None)
        inputs |= {"g_idx": None, "bias": np.linspace(-1, 1, n).astype(dtype)}
    return inputs


def _ranges(plan: CompiledModel, limit: int) -> int:
    """Assert every binding of the product is within `limit` and aligned; its dispatches per kernel."""
    (op,) = [op for op in plan.operations if op.op_type == "MatMulNBits"]
    dispatches = [s for s in op.steps if isinstance(s, Dispatch)]
    for step in dispatches:
        for b in step.bindings:
            if b.buffer.tensor is None:
                continue  # A quantized to scratch (accuracy_level 4 prefill): a few rows, never split
            size = b.size if b.size is not None else plan.tensors[b.buffer.tensor].nbytes - b.offset
            if not isinstance(size, int):
                continue  # symbolic A and Y: a few rows, never split
            assert isinstance(b.offset, int) and b.offset % BINDING_ALIGNMENT == 0, b
            assert size <= limit, b
    return len([s for s in dispatches if "quantize" not in plan.shaders[s.shader_index].label])


def _check(
    m: int,
    k: int,
    n: int,
    zero_points: str = "none",
    *,
    dtype: type = np.float32,
    bias: bool = False,
    level: int = 0,
    constant_weights: bool = True,
    symbolic: bool = False,
) -> int:
    """Run the split product against onnxruntime; the number of product dispatches."""
    inputs = _inputs(m, k, n, zero_points, dtype, bias)
    attrs = {"K": k, "N": n, "bits": 4, "block_size": 32, "accuracy_level": level}
    initializers = [name for name in inputs if name != "A"] if constant_weights else ["scales"]
    dim_params = {"A": ["m", k]} if symbolic else None
    int8 = level == 4 and zero_points != "float" and constant_weights
    tolerance = (INT8_TOLERANCE if int8 else F32_TOLERANCE) if dtype == np.float32 else None
    kwargs = {"domain": "com.microsoft", "initializers": initializers, "dim_params": dim_params}
    with binding_limit(LIMIT):
        count = _ranges(compile_model(make_model("MatMulNBits", inputs, attrs, **kwargs)), LIMIT)
        check_op("MatMulNBits", inputs, attrs, tolerance=tolerance, **kwargs)
    return count


@pytest.mark.parametrize("m", [1, 5])
@pytest.mark.parametrize("zero_points", ["none", "packed", "float"])
@pytest.mark.parametrize("level", [0, 4])
def test_columns_in_ranges(level: int, zero_points: str, m: int) -> None:
    # K 160: 5 blocks, so a column's packed zero points are 3 bytes (a range is a multiple of 4 panels)
    assert _check(m, 160, 1000, zero_points, level=level) >= 4


@pytest.mark.parametrize("level", [0, 4])
@pytest.mark.parametrize("zero_points", ["none", "packed"])
def test_bias_and_float16(zero_points: str, level: int) -> None:
    assert _check(1, 160, 1000, zero_points, bias=True, level=level) >= 4
    assert _check(3, 160, 1000, zero_points, dtype=np.float16, bias=True, level=level) >= 4


def test_runtime_weights_in_ranges() -> None:
    """B and zero points known only at run time: one byte per u32, 4x the bytes a range binds."""
    assert _check(2, 160, 700, "packed", constant_weights=False) >= 8


def test_symbolic_rows_plan_both_kernels_per_range() -> None:
    ranges = _check(4, 160, 1000, "packed", level=4, symbolic=True)
    assert ranges >= 8 and ranges % 2 == 0  # decode and prefill per range


def test_n_not_a_multiple_of_the_panel() -> None:
    """The last range's columns end mid-panel: the repacked B's padding is bound, the other arrays end."""
    assert _check(1, 256, 1000 - 37, "packed", bias=True) >= 2


def test_weight_under_the_limit_is_one_dispatch() -> None:
    inputs = _inputs(1, 160, 1000, "packed", np.float32, False)
    attrs = {"K": 160, "N": 1000, "bits": 4, "block_size": 32}
    model = make_model(
        "MatMulNBits", inputs, attrs, domain="com.microsoft", initializers=["B", "scales", "zero_points"]
    )
    assert _ranges(compile_model(model), 1 << 20) == 1


def test_a_range_that_cannot_be_aligned_is_refused() -> None:
    """A panel of B over the limit leaves no aligned range: a PlanningError naming the sizes, not a device error."""
    inputs = _inputs(1, 160, 1000, "packed", np.float32, False)
    attrs = {"K": 160, "N": 1000, "bits": 4, "block_size": 32}
    model = make_model(
        "MatMulNBits", inputs, attrs, domain="com.microsoft", initializers=["B", "scales", "zero_points"]
    )
    with binding_limit(4096), pytest.raises(PlanningError, match="storage binding limit"):
        compile_model(model)
