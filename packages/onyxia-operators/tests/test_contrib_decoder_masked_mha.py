"""com.microsoft DecoderMaskedMultiHeadAttention (lowered by LowerContribOps) against onnxruntime's
CPU kernel: one decoding step into a shared KV buffer (with and without bias, mask_index,
attention_bias; past_sequence_length a run-time input), cross-attention over head-split keys; the
beam-search inputs and the non-shared self-attention are refused by name."""

from __future__ import annotations

import re

import numpy as np
import pytest
from oracle import check_op, compile_model, make_model

from onyxia.core import OnyxiaError

MS = "com.microsoft"
B, D, N, CAPACITY = 2, 16, 2, 6
H = D // N
SELF = {"num_heads": N, "past_present_share_buffer": 1}
rng = np.random.default_rng(13)


def _f(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _step(filled: int, **extra: np.ndarray | None) -> dict[str, np.ndarray | None]:
    names = ("q", "k", "v", "mask", "attention_bias", "past_key", "past_value", "past_len", "bw", "ci", "bias")
    base = {"q": _f(B, 1, D), "k": _f(B, 1, D), "v": _f(B, 1, D), "past_key": _f(B, N, CAPACITY, H)}
    base.update(past_value=_f(B, N, CAPACITY, H), past_len=np.array(filled, np.int32))
    merged = {**base, **extra}
    last = max(i for i, n in enumerate(names) if merged.get(n) is not None)
    return {n: merged.get(n) for n in names[: last + 1]}


@pytest.mark.parametrize("filled", [0, 3, CAPACITY - 1])
@pytest.mark.parametrize("bias", [False, True])
def test_step_into_shared_buffer(filled: int, bias: bool) -> None:
    """All M buffer rows read, those past P weighted 0; present is the buffer with row P written."""
    inputs = _step(filled, bias=_f(3 * D) if bias else None)
    check_op("DecoderMaskedMultiHeadAttention", inputs, SELF, domain=MS, num_outputs=3)


def test_step_with_mask_and_attention_bias() -> None:
    """A mask [B, P + 1] and a bias [.., 1, P + 1] say the length: the present's first P + 1 rows."""
    mask = np.ones((B, 4), np.int32)
    mask[0, 1] = 0
    inputs = _step(3, mask=mask, attention_bias=_f(B, N, 1, 4))
    attrs = {**SELF, "scale": 0.5, "mask_filter_value": -1e4}
    check_op("DecoderMaskedMultiHeadAttention", inputs, attrs, domain=MS, num_outputs=3)


def test_past_sequence_length_changes_without_recompiling() -> None:
    """past_sequence_length is data: the same compiled step serves every position."""
    model = make_model("DecoderMaskedMultiHeadAttention", _step(0), SELF, domain=MS, num_outputs=3)
    from oracle import assert_close, reference_outputs, runtime

    executor = runtime().load_model(compile_model(model))
    for filled in (0, 2, 5):
        feeds = {k: v for k, v in _step(filled).items() if v is not None}
        got = executor.run(feeds)
        for output, expected in zip(model.graph.output, reference_outputs(model, feeds, "ort")):
            assert_close(got[output.name], expected, output.name)


def test_cross_attention() -> None:
    mask = np.ones((B, 5), np.int32)
    mask[1, 3:] = 0
    inputs: dict[str, np.ndarray | None] = {"q": _f(B, 1, D), "k": _f(B, N, 5, H), "v": _f(B, N, 5, H), "mask": mask}
    inputs.update({n: None for n in ("attention_bias", "past_key", "past_value", "past_len", "bw", "ci")})
    inputs["bias"] = _f(3 * D)
    check_op("DecoderMaskedMultiHeadAttention", inputs, {"num_heads": N}, domain=MS)


@pytest.mark.parametrize(
    ("inputs", "attrs", "message"),
    [
        (_step(2), {"num_heads": N}, "self-attention needs past_present_share_buffer=1"),
        (_step(2, ci=np.zeros((B, 1, CAPACITY), np.int32)), SELF, "input 9 (cache_indirection) is not supported"),
        (_step(2, q=_f(B, 2, D), k=_f(B, 2, D), v=_f(B, 2, D)), SELF, "query must be [B, 1, D]"),
    ],
)
def test_refusals_name_the_problem(inputs: dict, attrs: dict, message: str) -> None:
    model = make_model("DecoderMaskedMultiHeadAttention", inputs, attrs, domain=MS, num_outputs=3)
    with pytest.raises(OnyxiaError, match=re.escape(message)) as info:
        compile_model(model)
    assert "DecoderMaskedMultiHeadAttention" in str(info.value)
