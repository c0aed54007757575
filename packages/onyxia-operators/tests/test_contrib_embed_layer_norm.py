"""com.microsoft EmbedLayerNormalization (lowered by LowerContribOps) against onnxruntime's CPU
kernel: output, mask_index (count of ones; zeros without a mask) and embedding_sum, with and
without segments and position_ids, symbolic batch and sequence; refusals name the input."""

from __future__ import annotations

import re

import numpy as np
import pytest
from oracle import check_op, compile_model, make_model

from onyxia.core import OnyxiaError

MS = "com.microsoft"
B, S, H, VOCAB, MAX_POS = 2, 6, 16, 30, 10
rng = np.random.default_rng(3)


def _inputs(segments: bool = True, mask: bool = True, position_ids: np.ndarray | None = None) -> dict:
    return {
        "ids": rng.integers(0, VOCAB, (B, S)).astype(np.int32),
        "seg": rng.integers(0, 2, (B, S)).astype(np.int32) if segments else None,
        "word": rng.standard_normal((VOCAB, H)).astype(np.float32),
        "pos": rng.standard_normal((MAX_POS, H)).astype(np.float32),
        "seg_emb": rng.standard_normal((2, H)).astype(np.float32) if segments else None,
        "gamma": rng.standard_normal(H).astype(np.float32),
        "beta": rng.standard_normal(H).astype(np.float32),
        "mask": np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]], np.int32) if mask else None,
        "position_ids": position_ids,
    }


WEIGHTS = ["word", "pos", "seg_emb", "gamma", "beta"]


@pytest.mark.parametrize("segments", [True, False])
@pytest.mark.parametrize("mask", [True, False])
def test_outputs_match_onnxruntime(segments: bool, mask: bool) -> None:
    inputs = _inputs(segments, mask)
    check_op("EmbedLayerNormalization", inputs, {"epsilon": 1e-5}, domain=MS, initializers=WEIGHTS, num_outputs=3)


def test_default_epsilon() -> None:
    """(onnxruntime's schema inference wants mask_index, so two outputs at least.)"""
    check_op("EmbedLayerNormalization", _inputs(), domain=MS, initializers=WEIGHTS, num_outputs=2)


@pytest.mark.parametrize("shape", [(B, S), (1, S)])
def test_position_ids(shape: tuple[int, int]) -> None:
    position_ids = rng.integers(0, MAX_POS, shape).astype(np.int32)
    inputs = _inputs(position_ids=position_ids)
    check_op("EmbedLayerNormalization", inputs, domain=MS, initializers=WEIGHTS, num_outputs=2)


def test_symbolic_batch_and_sequence() -> None:
    dims: dict[str, list[int | str]] = {k: ["batch", "seq"] for k in ("ids", "seg", "mask")}
    check_op("EmbedLayerNormalization", _inputs(), domain=MS, initializers=WEIGHTS, num_outputs=3, dim_params=dims)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ids": np.zeros((B, S), np.int64)}, "input 0 'input_ids' is int64; expected one of int32"),
        ({"seg": None}, "segment_ids (input 1) and segment_embedding (input 4) come together"),
        ({"mask": np.ones((B, S + 1), np.int32)}, "input 7 (mask) must have input_ids' shape"),
        ({"gamma": np.ones(H + 1, np.float32)}, "input 5 (gamma) must be [16]"),
    ],
)
def test_refusals_name_the_input(change: dict, message: str) -> None:
    model = make_model("EmbedLayerNormalization", {**_inputs(), **change}, domain=MS, initializers=WEIGHTS)
    with pytest.raises(OnyxiaError, match=re.escape(message)) as info:
        compile_model(model)
    assert "EmbedLayerNormalization" in str(info.value)
