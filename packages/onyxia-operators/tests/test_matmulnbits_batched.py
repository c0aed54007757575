"""com.microsoft MatMulNBits on a batched decode step (M = 2 .. 8 rows, one token per stream: the rows4 and rows8
tiles of `matmul_nbits_tiles`): each row agrees with onnxruntime, and is bit-identical to what the decode kernel
computes for that row alone (M = 1), so a stream served in a batch gets exactly the tokens it gets alone.

One plan per case serves every M (A is [batch, 1, K] with a symbolic batch), as the LLM session's. The variants:
``simd8`` (what a compile without a device targets), ``simd8_shared`` (lavapipe as the runtime opens it: rows of A
spread over a subgroup's lanes, SPREAD_A) and ``subgroup`` (GPUs: split-K decode, which the rows tiles share).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from oracle import assert_close, compile_model, make_model, reference_outputs, runtime
from test_matmulnbits_ort import F32_TOLERANCE, INT8_TOLERANCE, quantized_weights

from onyxia.core.adapter_facts import force_variants
from onyxia.operators.matmul.variants import FAMILY

K, N = 160, 72  # 5 blocks of 32; N past one 64-column panel, not a multiple of a thread's 8 columns
CASES: dict[str, dict[str, Any]] = {
    # accuracy_level 4 (int8 activations, the genai int4 models), zero point 8: no sums of a
    "int8": dict(level=4, zero_points="none", dtype=np.float32, bias=False),
    # level 0 (f32 sums), per-column zero points and a bias, f16 activations
    "f16-zp-bias": dict(level=0, zero_points="packed", dtype=np.float16, bias=True),
    # level 4 with packed zero points (the block sums of a)
    "int8-zp": dict(level=4, zero_points="packed", dtype=np.float32, bias=False),
}


def _model(case: dict[str, Any]) -> Any:
    dtype = case["dtype"]
    inputs: dict[str, np.ndarray | None] = {
        "A": np.zeros((1, 1, K), dtype),
        **quantized_weights(K, N, 32, case["zero_points"], dtype),
    }
    if case["bias"]:
        inputs.setdefault("zero_points", None)
        inputs |= {"g_idx": None, "bias": np.linspace(-1, 1, N).astype(dtype)}
    attrs = {"K": K, "N": N, "bits": 4, "block_size": 32, "accuracy_level": case["level"]}
    weights = [name for name, value in inputs.items() if name != "A" and value is not None]
    return make_model(
        "MatMulNBits", inputs, attrs, domain="com.microsoft", initializers=weights, dim_params={"A": ["batch", 1, K]}
    )


def _tolerance(case: dict[str, Any]) -> tuple[float, float] | None:
    if case["dtype"] != np.float32:
        return None
    return INT8_TOLERANCE if case["level"] == 4 else F32_TOLERANCE


@pytest.mark.parametrize("variant", ["simd8", "simd8_shared", "subgroup"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_row_of_a_batch_is_the_row_alone(name: str, variant: str) -> None:
    case = CASES[name]
    model = _model(case)
    with force_variants({FAMILY: variant}):
        executor = runtime().load_model(compile_model(model))
    labels = {shader.label.split("@")[0] for shader in executor.compiled.shaders}
    assert {"MatMulNBits/decode", "MatMulNBits/rows4", "MatMulNBits/rows8"} <= labels
    rng = np.random.default_rng(len(name))
    a = (rng.standard_normal((8, 1, K)) * 2).astype(case["dtype"])
    alone = np.concatenate([executor.run({"A": a[r : r + 1]})["y0"] for r in range(8)])
    for m in range(2, 9):
        got = executor.run({"A": a[:m]})["y0"]
        (expected,) = reference_outputs(model, {"A": a[:m]}, "ort")
        assert_close(got, expected, f"M = {m}", tolerance=_tolerance(case))
        different = np.flatnonzero((got != alone[:m]).any(axis=(1, 2)))
        assert different.size == 0, f"M = {m}: rows {different.tolist()} differ from the rows run alone"


def test_batched_decode_is_one_dispatch_of_a_rows_tile() -> None:
    """A batched step runs one product dispatch (int8: plus the quantize dispatch), the tile of its M range."""
    for name, extra in (("f16-zp-bias", 0), ("int8", 1)):
        executor = runtime().load_model(compile_model(_model(CASES[name])))
        labels = [shader.label.split("@")[0] for shader in executor.compiled.shaders]
        for m, tile in ((1, "decode"), (2, "rows4"), (4, "rows4"), (5, "rows8"), (8, "rows8"), (9, "prefill")):
            executor.update_dimensions({"batch": m})
            dispatches = [step for step in executor.compiled.operations[0].steps if _live(step, m)]
            products = [labels[d.shader_index] for d in dispatches if "quantize" not in labels[d.shader_index]]
            assert products == [f"MatMulNBits/{tile}"], (name, m, products)
            assert len(dispatches) == 1 + (extra if m > 1 else 0), (name, m)


def _live(step: Any, m: int) -> bool:
    """Whether a dispatch has workgroups at batch m."""
    groups = step.workgroups
    counts = [g if isinstance(g, int) else g.evaluate({"batch": m}) for g in groups]
    return all(count > 0 for count in counts)
