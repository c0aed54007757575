"""`POST /v1/embeddings` with the real `openai` client: a chat model and an embedding model served side by side.

Vectors are checked against the fixture's sentence-transformers outputs, through both encodings (`float`,
and `base64`, which the client asks for by default and decodes), `dimensions`, token-id inputs, and OpenAI's
error bodies with `param` set. The last test runs `onyxia serve --embedding-model` itself in a child process.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from embedding_cases import CLS, DATA, MEAN, assert_same_vectors, expected, model, texts, token_counts
from serve_cases import MODEL, running, tiny_session
from serve_process import serve_command

from onyxia.cli.serve import create_app


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = create_app(session=tiny_session(), embedding_model=model(MEAN))
    with running(app) as base:
        yield base


@pytest.fixture(scope="module")
def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def _vectors(answer: Any) -> np.ndarray:
    """The answer's vectors; base64 strings (the client leaves them encoded when the caller asked for base64)
    decoded as little-endian float32, as OpenAI documents them."""
    assert [item.index for item in answer.data] == list(range(len(answer.data)))
    rows = [item.embedding for item in answer.data]
    if all(isinstance(row, str) for row in rows):
        return np.array([np.frombuffer(base64.b64decode(row), "<f4") for row in rows])
    return np.array(rows, np.float32)


@pytest.mark.parametrize("encoding", ["float", "base64", None])
def test_openai_client_gets_sentence_transformers_vectors(client: openai.OpenAI, encoding: str | None) -> None:
    """None: the client's default, which asks for base64 on the wire and decodes it into floats itself."""
    chosen = {"encoding_format": encoding} if encoding else {}
    answer = client.embeddings.create(model=MEAN, input=texts(MEAN), **chosen)  # type: ignore[arg-type]
    assert all(isinstance(item.embedding, str) == (encoding == "base64") for item in answer.data)
    assert answer.model == MEAN and answer.object == "list"
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == sum(token_counts(MEAN))
    assert_same_vectors(_vectors(answer), expected(MEAN), f"openai client, encoding_format={encoding}")


def test_base64_is_little_endian_float32_of_the_float_answer(url: str) -> None:
    body = {"input": texts(MEAN)[:2]}
    floats = httpx.post(f"{url}/v1/embeddings", json=body).json()["data"]
    encoded = httpx.post(f"{url}/v1/embeddings", json={**body, "encoding_format": "base64"}).json()["data"]
    for plain, packed in zip(floats, encoded, strict=True):
        decoded = np.frombuffer(base64.b64decode(packed["embedding"]), "<f4")
        assert np.array_equal(decoded, np.array(plain["embedding"], np.float32))


def test_dimensions_and_token_inputs(client: openai.OpenAI) -> None:
    cut = client.embeddings.create(model=MEAN, input=texts(MEAN), dimensions=8)
    assert_same_vectors(_vectors(cut), expected(MEAN, "dims_8"), "openai client, dimensions=8")
    ids = model(MEAN).tokenize(texts(MEAN))
    by_ids = client.embeddings.create(model=MEAN, input=ids, encoding_format="float")
    assert_same_vectors(_vectors(by_ids), expected(MEAN), "token-list inputs")
    one = client.embeddings.create(model=MEAN, input=ids[1], encoding_format="float")  # one list of ints: one item
    assert_same_vectors(_vectors(one), expected(MEAN)[1:2], "one token list")
    single = client.embeddings.create(model=MEAN, input=texts(MEAN)[3], encoding_format="float")
    assert single.usage.prompt_tokens == token_counts(MEAN)[3]
    assert_same_vectors(_vectors(single), expected(MEAN)[3:4], "one string")


def test_embeddings_while_a_chat_answer_streams(client: openai.OpenAI) -> None:
    """Two models, two runtimes, two threads: neither answer changes while the other model runs."""
    question = [{"role": "user", "content": "Tell me a fortune"}]

    def chat() -> str:
        answer = client.chat.completions.create(model=MODEL, messages=question, max_tokens=24, temperature=0)  # type: ignore[arg-type]
        return answer.choices[0].message.content or ""

    with ThreadPoolExecutor(1) as pool:
        during = pool.submit(chat)
        for _ in range(4):
            answer = client.embeddings.create(model=MEAN, input=texts(MEAN))
            assert_same_vectors(_vectors(answer), expected(MEAN), "embeddings during a chat answer")
        concurrent = during.result(timeout=120)
    assert concurrent == chat()


def test_models_lists_the_chat_and_the_embedding_model(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == [MODEL, MEAN]


@pytest.mark.parametrize(
    ("body", "status", "param", "message"),
    [
        ({"input": []}, 400, "input", "input is empty"),
        ({"input": "word " * 80}, 400, "input", "input 0 has .* tokens; .* at most 64"),
        ({"input": [[5, 999999]]}, 400, "input", "outside the vocabulary"),
        ({"input": "x", "dimensions": 12}, 400, "dimensions", r"expected one of \[8, 16\]"),
        ({"input": "x", "dimensions": 0}, 400, "dimensions", "at least 1"),
        ({"input": "x", "encoding_format": "int8"}, 400, "encoding_format", "expected 'float' or 'base64'"),
        ({"input": "x", "truncate_prompt_tokens": 8}, 400, "truncate_prompt_tokens", "not supported"),
        ({"input": "x", "model": MODEL}, 400, "model", "is the chat model"),
        ({"input": [1, "a"]}, 422, "input", "does not fit the schema"),
        ({"input": ["x"] * 2049}, 400, "input", "at most 2048"),
    ],
)
def test_bad_requests_are_openai_errors_naming_the_field(
    url: str, body: dict[str, Any], status: int, param: str, message: str
) -> None:
    answer = httpx.post(f"{url}/v1/embeddings", json=body, timeout=60)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and re.search(message, error["message"]), error


def test_the_openai_client_sees_a_400_for_dimensions_on_a_model_without_them() -> None:
    app = create_app(session=tiny_session(), embedding_model=model(CLS))
    with running(app) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)
        with pytest.raises(openai.BadRequestError, match="does not support 'dimensions'"):
            client.embeddings.create(model=CLS, input="hello", dimensions=8)
        answer = client.embeddings.create(model=CLS, input=texts(CLS), encoding_format="float")
        assert_same_vectors(_vectors(answer), expected(CLS), "CLS model over HTTP")


def test_a_server_without_an_embedding_model_says_how_to_start_one() -> None:
    with running(create_app(session=tiny_session())) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)
        with pytest.raises(openai.NotFoundError, match="--embedding-model"):
            client.embeddings.create(model="anything", input="hello")
        assert [m.id for m in client.models.list().data] == [MODEL]


def test_onyxia_serve_embedding_model_serves_both_from_the_command_line() -> None:
    args = [str(DATA / MODEL), "--precision", "fp32", "--max-length", "64", "--embedding-model", str(DATA / MEAN)]
    with serve_command(args) as (base, proc):
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)
        assert [m.id for m in client.models.list().data] == [MODEL, MEAN]
        answer = client.embeddings.create(model=MEAN, input=texts(MEAN))  # base64 on the wire, decoded by the client
        assert_same_vectors(_vectors(answer), expected(MEAN), "onyxia serve --embedding-model")
        chat = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=3, temperature=0
        )
        assert chat.usage is not None and chat.usage.completion_tokens == 3
    assert proc.returncode in (0, 130)
