"""com.microsoft Attention (lowered by LowerContribOps) against onnxruntime's CPU kernel: every
mask_index form, unidirectional, qkv_hidden_sizes, past/present, attention_bias, scale and
mask_filter_value; symbolic batch and sequence; the refusals name the node and the input."""

from __future__ import annotations

import re

import numpy as np
import pytest
from oracle import check_op, compile_model, make_model

from onyxia.core import OnyxiaError

MS = "com.microsoft"
B, S, D, N = 2, 5, 16, 2
rng = np.random.default_rng(7)


def _inputs(sizes: tuple[int, int, int] = (D, D, D), d_in: int = D, bias: bool = True) -> dict[str, np.ndarray | None]:
    total = sum(sizes)
    return {
        "x": rng.standard_normal((B, S, d_in)).astype(np.float32),
        "w": (rng.standard_normal((d_in, total)) * 0.3).astype(np.float32),
        "b": rng.standard_normal(total).astype(np.float32) if bias else None,
    }


MASKS = {
    "none": None,
    "lengths": np.array([3, 5], np.int32),
    "ends_starts": np.array([4, 5, 1, 2], np.int32),
    "raw_2d": np.array([[1, 1, 0, 1, 0], [1, 1, 1, 1, 1]], np.int32),
    "raw_3d": (rng.random((B, S, S)) > 0.3).astype(np.int32),
}


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_mask_forms(mask: str, unidirectional: int) -> None:
    inputs = {**_inputs(), "m": MASKS[mask]}
    check_op(
        "Attention", inputs, {"num_heads": N, "unidirectional": unidirectional}, domain=MS, initializers=["w", "b"]
    )


def test_qkv_hidden_sizes_scale_and_filter_value() -> None:
    """v wider than q/k (its own head size), an explicit scale, finfo.min as the filter (the optimizer's choice)."""
    inputs = {**_inputs(sizes=(8, 8, 24), d_in=12), "m": MASKS["lengths"]}
    attrs = {"num_heads": 4, "qkv_hidden_sizes": [8, 8, 24], "scale": 0.3, "mask_filter_value": -3.4028234663852886e38}
    check_op("Attention", inputs, attrs, domain=MS, initializers=["w", "b"])


def test_no_bias_and_attention_bias() -> None:
    inputs = {**_inputs(bias=False), "m": MASKS["raw_2d"], "past": None}
    inputs["attention_bias"] = rng.standard_normal((1, N, S, S)).astype(np.float32)
    check_op("Attention", inputs, {"num_heads": N}, domain=MS, initializers=["w"])


@pytest.mark.parametrize("unidirectional", [0, 1])
def test_past_and_present(unidirectional: int) -> None:
    """k and v after 3 cached positions; the mask spans past + new keys; present is the grown cache."""
    past = rng.standard_normal((2, B, N, 3, D // N)).astype(np.float32)
    mask = np.ones((B, 3 + S), np.int32)
    mask[0, 1] = 0
    inputs = {**_inputs(), "m": mask, "past": past}
    attrs = {"num_heads": N, "unidirectional": unidirectional}
    check_op("Attention", inputs, attrs, domain=MS, initializers=["w", "b"], num_outputs=2)


def test_present_without_past() -> None:
    check_op("Attention", {**_inputs(), "m": MASKS["lengths"]}, {"num_heads": N}, domain=MS, num_outputs=2)


def test_symbolic_batch_and_sequence() -> None:
    """Dims bound at run time: the key positions come from the graph's own Shape, not constants."""
    inputs = {**_inputs(), "m": MASKS["lengths"]}
    dim_params: dict[str, list[int | str]] = {"x": ["batch", "seq", D], "m": ["batch"]}
    check_op("Attention", inputs, {"num_heads": N}, domain=MS, initializers=["w", "b"], dim_params=dim_params)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"attrs": {"num_heads": 3}}, "not positive multiples of num_heads"),
        ({"attrs": {"num_heads": N, "do_rotary": 1}}, "do_rotary=1 is not supported"),
        ({"m": np.ones((B, 1, S, S), np.int32)}, "mask_index of rank 4"),
        ({"m": np.ones(3, np.int32)}, "1-D mask_index must be [batch] or [2 * batch]"),
        ({"m": np.ones(B, np.int64)}, "'mask_index' is int64; expected one of int32"),
    ],
)
def test_refusals_name_the_problem(change: dict[str, object], message: str) -> None:
    inputs = {**_inputs(), "m": change.get("m", MASKS["lengths"])}
    attrs = change.get("attrs", {"num_heads": N})
    model = make_model("Attention", inputs, attrs, domain=MS, initializers=["w", "b"])  # type: ignore[arg-type]
    with pytest.raises(OnyxiaError, match=re.escape(message)) as info:
        compile_model(model)
    assert "Attention" in str(info.value)


def test_lowered_onto_one_attention_kernel() -> None:
    """The contrib node leaves no trace in the plan: its projection is a MatMul family op and its
    attention the one com.onyxia ScaledDotProductAttention kernel."""
    model = make_model(
        "Attention", {**_inputs(), "m": MASKS["lengths"]}, {"num_heads": N}, domain=MS, initializers=["w", "b"]
    )
    ops = [op.op_type for op in compile_model(model).operations]
    assert "Attention" not in ops and ops.count("ScaledDotProductAttention") == 1, ops
    assert any(op.startswith("MatMul") for op in ops), ops
