"""com.microsoft MultiHeadAttention (lowered by LowerContribOps) against onnxruntime's CPU kernel:
self and cross attention, bias, key_padding_mask forms, unidirectional, attention_bias, past and
present, keys already split in heads; the forms onnxruntime's CPU kernel refuses are refused by name."""

from __future__ import annotations

import re

import numpy as np
import pytest
from oracle import check_op, compile_model, make_model

from onyxia.core import OnyxiaError

MS = "com.microsoft"
B, S, L, D, N = 2, 4, 5, 16, 2
H = D // N
rng = np.random.default_rng(11)


def _f(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _inputs(**extra: np.ndarray | None) -> dict[str, np.ndarray | None]:
    names = ("q", "k", "v", "bias", "mask", "attention_bias", "past_key", "past_value")
    base: dict[str, np.ndarray | None] = {"q": _f(B, S, D), "k": _f(B, L, D), "v": _f(B, L, D)}
    merged = {**base, **extra}
    return {n: merged.get(n) for n in names if any(merged.get(m) is not None for m in names[names.index(n) :])}


MASKS = {
    "none": None,
    "lengths": np.array([2, 5], np.int32),
    "raw_2d": np.array([[1, 0, 1, 1, 0], [1, 1, 1, 1, 1]], np.int32),
    "raw_3d": (rng.random((B, S, L)) > 0.3).astype(np.int32),
}


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("bias", [False, True])
def test_cross_attention_masks_and_bias(mask: str, bias: bool) -> None:
    inputs = _inputs(bias=_f(3 * D) if bias else None, mask=MASKS[mask])
    check_op("MultiHeadAttention", inputs, {"num_heads": N}, domain=MS, initializers=["bias"])


@pytest.mark.parametrize("unidirectional", [0, 1])
def test_self_attention_unidirectional_with_attention_bias(unidirectional: int) -> None:
    x = _f(B, S, D)
    inputs = _inputs(k=x, v=x, attention_bias=_f(B, 1, S, S), mask=np.array([3, 4], np.int32))
    attrs = {"num_heads": N, "unidirectional": unidirectional, "scale": 0.25, "mask_filter_value": -1e9}
    check_op("MultiHeadAttention", inputs, attrs, domain=MS)


def test_wider_value_heads() -> None:
    check_op("MultiHeadAttention", _inputs(v=_f(B, L, 3 * D), bias=_f(5 * D)), {"num_heads": N}, domain=MS)


def test_past_and_present() -> None:
    """More keys than queries with past: the causal offset is the past length, the last row unmasked."""
    inputs = _inputs(bias=_f(3 * D), past_key=_f(B, N, 3, H), past_value=_f(B, N, 3, H))
    check_op("MultiHeadAttention", inputs, {"num_heads": N, "unidirectional": 1}, domain=MS, num_outputs=3)


def test_keys_already_in_heads() -> None:
    """Whisper's cross-attention reads the encoder's keys as [B, N, L, H]; the bias then applies to q only."""
    inputs = _inputs(k=_f(B, N, L, H), v=_f(B, N, L, H), bias=_f(3 * D), mask=MASKS["raw_2d"])
    check_op("MultiHeadAttention", inputs, {"num_heads": N}, domain=MS, num_outputs=3)


def test_symbolic_lengths() -> None:
    dims: dict[str, list[int | str]] = {"q": ["batch", "seq", D], "k": ["batch", "keys", D], "v": ["batch", "keys", D]}
    dims["mask"] = ["batch"]
    check_op("MultiHeadAttention", _inputs(mask=MASKS["lengths"]), {"num_heads": N}, domain=MS, dim_params=dims)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"k": _f(B, L, N, 2, H), "v": None}, "key and value are required: packed QKV/KV forms are not supported"),
        ({"mask": np.array([1, 2, 3, 4], np.int32)}, "a 1-D key_padding_mask must be [batch]"),
        ({"k": _f(B, L, D + 2), "v": _f(B, L, D + 2)}, "the key hidden size must equal query's 16"),
        ({"past_key": _f(B, N, 3, H)}, "past_key and past_value come together"),
    ],
)
def test_refusals_name_the_problem(extra: dict[str, np.ndarray | None], message: str) -> None:
    model = make_model("MultiHeadAttention", _inputs(**extra), {"num_heads": N}, domain=MS)
    with pytest.raises(OnyxiaError, match=re.escape(message)) as info:
        compile_model(model)
    assert "MultiHeadAttention" in str(info.value)
