"""vLLM's /tokenize and /detokenize and OpenAI's models.retrieve: the ids /tokenize returns are the ones the
completion endpoints feed (the count equals their usage.prompt_tokens), /detokenize inverts them, and bad bodies
are 400s naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from serve_cases import MODEL, running, tiny_session

from onyxia.cli.serve import create_app

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a fortune"}]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running(create_app(session=tiny_session())) as url:
        yield url


@pytest.fixture(scope="module")
def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def _post(url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=60)


def test_tokenize_returns_the_ids_the_endpoints_feed(url: str, client: openai.OpenAI) -> None:
    llm = tiny_session()
    text = _post(url, "/tokenize", {"prompt": "Once upon a time"}).json()
    assert text["tokens"] == llm.tokenizer.encode("Once upon a time")
    assert text["count"] == len(text["tokens"]) and text["max_model_len"] == llm.max_length
    completion = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=1, temperature=0)
    assert completion.usage is not None and completion.usage.prompt_tokens == text["count"]
    chat = _post(url, "/tokenize", {"messages": MESSAGES}).json()
    answer = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1, temperature=0)  # type: ignore[arg-type]
    assert answer.usage is not None and answer.usage.prompt_tokens == chat["count"] == len(chat["tokens"])
    assert _post(url, "/tokenize", {"prompt": chat["tokens"]}).json()["tokens"] == chat["tokens"]


def test_detokenize_inverts_tokenize(url: str) -> None:
    ids = _post(url, "/tokenize", {"prompt": "Once upon a time"}).json()["tokens"]
    assert _post(url, "/detokenize", {"tokens": ids}).json() == {"prompt": "Once upon a time"}


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/tokenize", {}, "prompt"),
        ("/tokenize", {"prompt": "x", "messages": MESSAGES}, "prompt"),
        ("/tokenize", {"prompt": "x", "tools": []}, "tools"),
        ("/tokenize", {"prompt": "x", "add_bos": True}, "add_bos"),
        ("/tokenize", {"prompt": [5, 99999999]}, "prompt"),
        ("/tokenize", {"messages": []}, "messages"),
        ("/detokenize", {"tokens": [2, -1]}, "tokens"),
    ],
)
def test_bad_bodies_are_400s_naming_the_field(url: str, path: str, body: dict[str, Any], param: str) -> None:
    response = _post(url, path, body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_models_retrieve(client: openai.OpenAI) -> None:
    served = client.models.list().data[0].id
    assert client.models.retrieve(served).id == served
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("not-this-one")
    assert served in str(raised.value) and raised.value.code == "model_not_found"
