"""com.onyxia TokenLogprobs against onnxruntime: LogSoftmax over the vocabulary then TopK (largest, sorted) is the
oracle for the top entries (ids in TopK's order, lower id first on ties), and the sampled token's value is read
from onnxruntime's LogSoftmax row. Rows are asked for by index (a subset, out of order), so only asking rows cost
anything; no asking row at all is an empty output and no dispatch."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from oracle import compile_model, make_model, runtime

from onyxia.core import OnyxiaError

RNG = np.random.default_rng(41)
GEMMA_VOCAB = 262_144 + 7  # Gemma 3's vocabulary plus a ragged last chunk


def _executor(logits: np.ndarray, k: int) -> Any:
    tokens = np.zeros(logits.shape[:-1], np.int64)
    rows = np.zeros(1, np.int64)
    model = make_model(
        "TokenLogprobs",
        {"logits": logits, "tokens": tokens, "rows": rows},
        {"k": k},
        domain="com.onyxia",
        dim_params={"rows": ["asked"]},
    )
    return runtime().load_model(compile_model(model))


def _oracle(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """onnxruntime's LogSoftmax of each row, and TopK's values and ids of it (k at least 1 for TopK)."""
    vocab = logits.shape[-1]
    x = helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(logits.dtype), [None, vocab])
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in (("lsm", 1), ("v", 1), ("i", 7))]
    kk = onnx.numpy_helper.from_array(np.array([max(k, 1)], np.int64), "kk")
    nodes = [
        helper.make_node("Cast", ["x"], ["x32"], to=1),
        helper.make_node("LogSoftmax", ["x32"], ["lsm"], axis=-1),
        helper.make_node("TopK", ["lsm", "kk"], ["v", "i"], axis=-1, largest=1, sorted=1),
    ]
    graph = helper.make_graph(nodes, "oracle", [x], outs, [kk])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    lsm, values, ids = session.run(None, {"x": logits.reshape(-1, vocab)})
    return lsm, values[:, :k], ids[:, :k]


def _check(logits: np.ndarray, tokens: np.ndarray, rows: np.ndarray, k: int, executor: Any) -> None:
    out = executor.run({"logits": logits, "tokens": tokens, "rows": rows})["y0"]
    assert out.shape == (len(rows), 1 + 2 * k) and out.dtype == np.float32
    lsm, values, ids = _oracle(logits, k)
    flat_tokens = tokens.reshape(-1)
    for r, row in enumerate(rows):
        np.testing.assert_allclose(out[r, 0], lsm[row, flat_tokens[row]], rtol=0, atol=2e-5)
        np.testing.assert_array_equal(out[r, 1 + k :].astype(np.int64), ids[row])
        np.testing.assert_allclose(out[r, 1 : 1 + k], values[row], rtol=0, atol=2e-5)


@pytest.fixture(scope="module")
def gemma_rows() -> tuple[np.ndarray, Any]:
    logits = (RNG.standard_normal((3, 1, GEMMA_VOCAB)) * 3).astype(np.float32)
    return logits, _executor(logits, 20)


def test_a_gemma_sized_vocabulary_matches_log_softmax_and_top_k(gemma_rows: tuple[np.ndarray, Any]) -> None:
    logits, executor = gemma_rows
    logits = logits.copy()
    best = int(np.argmax(logits[1, 0]))
    logits[1, 0, [5, GEMMA_VOCAB - 1, best + 1]] = logits[1, 0, best]  # ties with the max: lower ids first
    logits[1, 0, 77] = logits[1, 0, best] - 0.25
    logits[1, 0, 78] = logits[1, 0, 77]  # a tie inside the top k
    tokens = np.array([[best], [GEMMA_VOCAB - 1], [3]], np.int64)
    _check(logits, tokens, np.array([2, 0, 1], np.int64), 20, executor)


def test_no_asking_row_is_an_empty_output_and_no_dispatch(gemma_rows: tuple[np.ndarray, Any]) -> None:
    logits, executor = gemma_rows
    tokens = np.zeros((3, 1), np.int64)
    out = executor.run({"logits": logits, "tokens": tokens, "rows": np.zeros(0, np.int64)})["y0"]
    assert out.shape == (0, 41)
    assert not any(op == "TokenLogprobs" for _, op in executor.live_dispatches())
    _check(logits, tokens, np.array([1], np.int64), 20, executor)  # and again one row, same plan
    assert any(op == "TokenLogprobs" for _, op in executor.live_dispatches())


@pytest.mark.parametrize(("dtype", "k", "vocab"), [(np.float16, 5, 3001), (np.float32, 0, 3001), (np.float32, 20, 7)])
def test_small_vocabularies_half_precision_and_k_zero(dtype: type, k: int, vocab: int) -> None:
    logits: np.ndarray = (RNG.standard_normal((2, vocab)) * 4).astype(dtype)
    tokens = RNG.integers(0, vocab, (2,)).astype(np.int64)
    executor = _executor(logits, k)
    if vocab >= k:
        _check(logits, tokens, np.array([1, 0], np.int64), k, executor)
        return
    out = executor.run({"logits": logits, "tokens": tokens, "rows": np.array([0], np.int64)})["y0"]
    lsm, values, ids = _oracle(logits, vocab)  # fewer ids than k: the rest are id -1
    np.testing.assert_array_equal(out[0, 1 + k : 1 + k + vocab].astype(np.int64), ids[0])
    np.testing.assert_allclose(out[0, 1 : 1 + vocab], values[0], rtol=0, atol=2e-5)
    assert (out[0, 1 + k + vocab :] == -1).all()


def test_bad_k_and_token_shape_name_the_node() -> None:
    logits = np.zeros((2, 8), np.float32)
    feeds: dict[str, np.ndarray | None] = {
        "logits": logits,
        "tokens": np.zeros(2, np.int64),
        "rows": np.zeros(1, np.int64),
    }
    with pytest.raises(OnyxiaError, match=r"attribute k is 21; expected 0 to 20"):
        compile_model(make_model("TokenLogprobs", feeds, {"k": 21}, domain="com.onyxia"))
    feeds["tokens"] = np.zeros(3, np.int64)
    with pytest.raises(OnyxiaError, match=r"tokens \(input 1\).*expected \[2\]"):
        compile_model(make_model("TokenLogprobs", feeds, {"k": 1}, domain="com.onyxia"))
