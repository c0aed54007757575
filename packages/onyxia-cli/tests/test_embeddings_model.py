"""`onyxia.cli.embeddings.EmbeddingModel` (the Python API) against sentence-transformers' outputs and onnxruntime.

The oracle is the fixture's `expected.npz`: sentence-transformers' Pooling and Normalize applied to
onnxruntime's hidden states of the optimum export (tools/embedding_fixture). onnxruntime runs again here, so
the hidden states Onyxia pools are checked against it directly, and the committed numbers are shown to
follow from them.
"""

from __future__ import annotations

import numpy as np
import pytest
from embedding_cases import (
    CLS,
    MEAN,
    assert_same_vectors,
    expected,
    expected_keys,
    model,
    ort_hidden,
    texts,
    token_counts,
)

from onyxia.cli.embeddings import EmbeddingInputError, pool

FIXTURES = (MEAN, CLS)


@pytest.mark.parametrize("name", FIXTURES)
def test_embeddings_match_sentence_transformers(name: str) -> None:
    result = model(name).encode(texts(name))
    assert result.vectors.dtype == np.float32
    assert result.token_counts == token_counts(name)
    assert_same_vectors(result.vectors, expected(name), f"{name} vs sentence-transformers")


@pytest.mark.parametrize("name", FIXTURES)
def test_hidden_states_match_onnxruntime_and_the_oracle_follows_from_them(name: str) -> None:
    embedder = model(name)
    ids = embedder.tokenize(texts(name))
    hidden, mask = embedder.hidden_states(ids)
    reference = ort_hidden(name, ids)
    diff = float(np.abs((hidden - reference) * mask[..., None]).max())
    assert diff < 1e-4, f"{name}: hidden states differ from onnxruntime's by {diff:.3g}"
    # the committed expectation is sentence-transformers' pooling of these very onnxruntime outputs
    for mode in ("cls", "mean"):
        oracle = np.abs(pool([mode], reference, mask) - expected(name, f"pool_{mode}")).max()
        assert oracle < 1e-5, f"{name}: {mode} pooling of today's onnxruntime output differs by {oracle:.3g}"


@pytest.mark.parametrize("key", [k for k in expected_keys(MEAN) if k.startswith("pool_")])
def test_each_pooling_mode_matches_sentence_transformers(key: str) -> None:
    embedder = model(MEAN)
    hidden, mask = embedder.hidden_states(embedder.tokenize(texts(MEAN)))
    assert_same_vectors(pool([key.removeprefix("pool_")], hidden, mask), expected(MEAN, key), key)


def test_several_modes_concatenate_in_the_given_order() -> None:
    embedder = model(MEAN)
    hidden, mask = embedder.hidden_states(embedder.tokenize(texts(MEAN)))
    joined = pool(["cls", "mean"], hidden, mask)
    want = np.concatenate([expected(MEAN, "pool_cls"), expected(MEAN, "pool_mean")], axis=1)
    assert_same_vectors(joined, want, "cls+mean")


@pytest.mark.parametrize("key", [k for k in expected_keys(MEAN) if k.startswith("dims_")])
def test_matryoshka_dimensions_cut_then_normalise(key: str) -> None:
    size = int(key.removeprefix("dims_"))
    vectors = model(MEAN).embed(texts(MEAN), dimensions=size)
    assert vectors.shape == (len(texts(MEAN)), size)
    assert_same_vectors(vectors, expected(MEAN, key), f"dimensions={size}")


def test_batches_pad_each_to_its_longest_row_without_changing_any_vector() -> None:
    embedder = model(MEAN)
    alone = np.concatenate([embedder.embed([t]) for t in texts(MEAN)])
    saved = embedder.max_batch
    embedder.max_batch = 3
    try:
        small_batches = embedder.embed(texts(MEAN))
    finally:
        embedder.max_batch = saved
    assert_same_vectors(alone, expected(MEAN), "one text per run")
    assert_same_vectors(small_batches, expected(MEAN), "batches of 3")


def test_token_lists_embed_as_the_texts_they_come_from() -> None:
    embedder = model(CLS)
    ids = embedder.tokenize(texts(CLS))
    assert_same_vectors(embedder.encode(ids).vectors, expected(CLS), "token-id input")


def test_dimensions_are_refused_where_the_model_has_no_matryoshka_sizes() -> None:
    with pytest.raises(EmbeddingInputError, match="does not support 'dimensions'") as caught:
        model(CLS).embed(["hello"], dimensions=8)
    assert caught.value.field == "dimensions"
    with pytest.raises(EmbeddingInputError, match=r"dimensions 12 .* expected one of \[8, 16\]"):
        model(MEAN).embed(["hello"], dimensions=12)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([], "no input"),
        ([[]], "input 0 has no tokens"),
        (["ok", "word " * 80], r"input 1 has \d+ tokens; .* at most 64 \(model_max_length in tokenizer_config.json\)"),
        ([[2, 5, 100000]], "token id 100000 is outside the vocabulary"),
        (["text", [2, 3]], "mixes texts and token lists"),
    ],
)
def test_bad_input_names_the_item_and_the_limit(inputs: list, message: str) -> None:
    with pytest.raises(EmbeddingInputError, match=message) as caught:
        model(CLS).encode(inputs)
    assert caught.value.field == "input"
