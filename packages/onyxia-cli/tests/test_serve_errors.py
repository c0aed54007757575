"""Every bad request answered with its status and OpenAI's error body, and the server serving on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from serve_cases import running, tiny_session

from onyxia.cli.serve import create_app

HELLO = [{"role": "user", "content": "hello"}]
CHAT = "/v1/chat/completions"
KEY = "sk-test-key"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running(create_app(session=tiny_session())) as base:
        yield base


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"] and "Traceback" not in response.text
    detail: dict[str, Any] = body["error"]
    return detail


def _still_serving(url: str) -> None:
    answer = httpx.post(f"{url}{CHAT}", json={"messages": HELLO, "max_tokens": 2, "temperature": 0}, timeout=60)
    assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 2


BAD_BODIES = [
    # (case, raw body, status, param the error names)
    ("malformed JSON", b'{"messages": [', 400, None),
    ("not an object", b"[1, 2]", 422, None),
    ("messages missing", b"{}", 422, "messages"),
    ("messages of the wrong type", b'{"messages": "hello"}', 422, "messages"),
    (
        "temperature of the wrong type",
        b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}',
        422,
        "temperature",
    ),
    (
        "max_tokens of the wrong type",
        b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 2.5}',
        422,
        "max_tokens",
    ),
    ("empty messages", b'{"messages": []}', 400, "messages"),
    ("unknown role", b'{"messages": [{"role": "robot", "content": "x"}]}', 400, "messages.0.role"),
    (
        "image content",
        b'{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}',
        400,
        "messages.0.content",
    ),
    ("n of 2", b'{"messages": [{"role": "user", "content": "x"}], "n": 2}', 400, "n"),
    ("max_tokens 0", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', 400, "max_tokens"),
    ("top_p out of range", b'{"messages": [{"role": "user", "content": "x"}], "top_p": 1.5}', 400, None),
    (
        "stop id outside the vocabulary",
        b'{"messages": [{"role": "user", "content": "x"}], "stop": [99999999]}',
        400,
        "stop",
    ),
    (
        "presence penalty out of range",
        b'{"messages": [{"role": "user", "content": "x"}], "presence_penalty": 3}',
        400,
        None,
    ),
    (
        "logit_bias key not a token id",
        b'{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"fortune": 5}}',
        400,
        "logit_bias",
    ),
    (
        "logit_bias id outside the vocabulary",
        b'{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"99999999": 5}}',
        400,
        "logit_bias",
    ),
    ("min_p out of range", b'{"messages": [{"role": "user", "content": "x"}], "min_p": -0.5}', 400, None),
    (
        "logit_bias out of range",
        b'{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"5": 300}}',
        400,
        None,
    ),
]


@pytest.mark.parametrize(("case", "body", "status", "param"), BAD_BODIES, ids=[c[0] for c in BAD_BODIES])
def test_bad_chat_bodies(url: str, case: str, body: bytes, status: int, param: str | None) -> None:
    response = httpx.post(f"{url}{CHAT}", content=body, headers={"content-type": "application/json"})
    error = _error(response, status)
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param
    _still_serving(url)


def test_a_prompt_over_max_length_is_413(url: str) -> None:
    words = " ".join(["fortune"] * (tiny_session().max_length + 10))
    error = _error(httpx.post(f"{url}{CHAT}", json={"messages": [{"role": "user", "content": words}]}), 413)
    assert error["code"] == "context_length_exceeded" and str(tiny_session().max_length) in error["message"]
    error = _error(httpx.post(f"{url}/v1/completions", json={"prompt": words}), 413)
    _still_serving(url)


def test_bad_completion_bodies(url: str) -> None:
    assert _error(httpx.post(f"{url}/v1/completions", json={"prompt": ["a", "b"]}), 400)["param"] == "prompt"
    assert _error(httpx.post(f"{url}/v1/completions", json={"prompt": [-1, 2]}), 400)["param"] == "prompt"
    assert _error(httpx.post(f"{url}/v1/completions", json={"prompt": 3}), 422)["param"] == "prompt"
    _still_serving(url)


def test_unknown_routes_and_methods(url: str) -> None:
    assert _error(httpx.get(f"{url}/v1/nothing"), 404)["type"] == "not_found_error"
    _error(httpx.get(f"{url}{CHAT}"), 405)
    _still_serving(url)


def test_the_openai_client_sees_the_errors(url: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="n is 3"):
        client.chat.completions.create(model="any", messages=HELLO, n=3)


def test_api_key() -> None:
    with running(create_app(session=tiny_session(), api_key=KEY)) as base:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            error = _error(httpx.post(f"{base}{CHAT}", json={"messages": HELLO}, headers=headers), 401)
            assert error["type"] == "authentication_error" and error["code"] == "invalid_api_key"
        assert httpx.get(f"{base}/health").status_code == 200  # probes need no key
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0)
        answer = client.chat.completions.create(model="any", messages=HELLO, max_tokens=2, temperature=0)
        assert answer.usage is not None and answer.usage.completion_tokens == 2
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{base}/v1", api_key="nope", max_retries=0).models.list()
