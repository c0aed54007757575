"""Structured output through the real `openai` client against `onyxia serve` with the built-in demo model
(fortune-gemma3, 4M parameters): `chat.completions.parse(response_format=<pydantic model>)` validates for
every case of `structured_cases` (50 schemas x prompts); regex, choice and Lark constraints; streamed text
equals the whole answer; constrained and unconstrained requests side by side in the batch; bad constraints are
400s naming the field, answered before anything is queued."""

from __future__ import annotations

import importlib.resources
import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel
from serve_cases import running
from structured_cases import CASES, DEMO_DIR, Person

from onyxia.cli.llm import LlmSession
from onyxia.cli.serve import create_app

MODEL = "fortune"
_PERSON = to_strict_json_schema(Person)  # what `parse` sends: additionalProperties false


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Any, str]]:
    with importlib.resources.as_file(importlib.resources.files("onyxia.cli.data") / DEMO_DIR) as root:
        session = LlmSession.from_pretrained(root, max_length=512, slots=2)
    app = create_app(session=session, model_name=MODEL, parallel=2)
    with running(app) as url:
        yield app, url


@pytest.fixture(scope="module")
def client(server: tuple[Any, str]) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server[1]}/v1", api_key="unused", max_retries=0, timeout=120)


def _ask(prompt: str) -> list[Any]:
    return [{"role": "user", "content": prompt}]


@pytest.mark.parametrize(("schema", "prompt"), CASES, ids=[f"{s.__name__}-{i % 5}" for i, (s, _) in enumerate(CASES)])
def test_parse_returns_a_valid_instance(client: openai.OpenAI, schema: type[BaseModel], prompt: str) -> None:
    answer = client.chat.completions.parse(
        model=MODEL, messages=_ask(prompt), response_format=schema, temperature=0, max_tokens=200
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(choice.message.parsed, schema)
    assert schema.model_validate_json(choice.message.content or "") == choice.message.parsed


def _streamed(client: openai.OpenAI, **request: Any) -> str:
    chunks = client.chat.completions.create(model=MODEL, stream=True, **request)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


@pytest.mark.parametrize(
    "extra",
    [
        {"response_format": {"type": "json_object"}},
        {"extra_body": {"guided_regex": r"[0-9]{3}-[a-z]{2,8}"}},
        {"extra_body": {"guided_choice": ["heads", "tails", "edge"]}},
        {"extra_body": {"guided_grammar": 'start: "Life is " WORD "."\nWORD: /[a-z]{1,10}/'}},
    ],
    ids=["json_object", "regex", "choice", "lark"],
)
def test_constraints_hold_and_streaming_gives_the_same_text(client: openai.OpenAI, extra: dict[str, Any]) -> None:
    request = {"messages": _ask("Tell me a fortune"), "temperature": 0, "max_tokens": 120, **extra}
    whole = client.chat.completions.create(model=MODEL, **request)
    text = whole.choices[0].message.content or ""
    assert _streamed(client, **request) == text
    body = extra.get("extra_body", {})
    if "guided_regex" in body:
        assert re.fullmatch(body["guided_regex"], text), text
    elif "guided_choice" in body:
        assert text in body["guided_choice"]
    elif "guided_grammar" in body:
        assert re.fullmatch(r"Life is [a-z]{1,10}\.", text), text
    elif whole.choices[0].finish_reason == "length":  # any object: nothing bounds a string's length
        assert text.startswith("{") and len(text) > 1
        return
    else:
        assert isinstance(json.loads(text), dict)
    assert whole.choices[0].finish_reason == "stop"


def test_completions_take_the_same_constraints(client: openai.OpenAI) -> None:
    answer = client.completions.create(
        model=MODEL, prompt="Life is", temperature=0, max_tokens=40, extra_body={"guided_regex": r"(good|bad)!"}
    )
    assert answer.choices[0].text in ("good!", "bad!")


def test_sampled_constrained_rows_beside_unconstrained_ones(client: openai.OpenAI) -> None:
    """Both slots busy at once: sampled JSON rows (drawn on the GPU under their masks) next to plain prose."""

    def one(i: int) -> tuple[bool, str]:
        request: dict[str, Any] = {"messages": _ask(f"Tell me fortune {i}"), "max_tokens": 80, "seed": i}
        if i % 2 == 0:
            request["response_format"] = {"type": "json_schema", "json_schema": {"name": "p", "schema": _PERSON}}
        text = client.chat.completions.create(model=MODEL, temperature=0.8, **request).choices[0].message.content
        return i % 2 == 0, text or ""

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(6)))
    for constrained, text in results:
        if constrained:
            Person.model_validate_json(text)


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strin"}}}},
            "response_format",
            "strin",
        ),
        ({"response_format": {"type": "xml"}}, "response_format", "expected text, json_object or json_schema"),
        ({"response_format": {"type": "json_schema"}}, "response_format", "json_schema.schema"),
        ({"guided_regex": "[a-"}, "guided_regex", "unclosed character class"),
        ({"guided_grammar": "start: foo"}, "guided_grammar", "unknown name"),
        ({"guided_json": "{not json"}, "guided_json", "not valid JSON"),
        ({"guided_choice": []}, "guided_choice", "non-empty list"),
        ({"guided_regex": "a", "guided_choice": ["a"]}, "guided_choice", "one output constraint"),
    ],
    ids=["schema", "type", "no-schema", "regex", "lark", "json-text", "choice", "two"],
)
def test_bad_constraints_are_400_naming_the_field(
    server: tuple[Any, str], body: dict[str, Any], param: str, message: str
) -> None:
    app, url = server
    before = app.state.onyxia.engine.batch.steps
    request = {"model": MODEL, "messages": _ask("Hi"), "max_tokens": 5, **body}
    response = httpx.post(f"{url}/v1/chat/completions", json=request, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and message in error["message"], error
    assert app.state.onyxia.engine.batch.steps == before  # refused before it was queued: no generation
