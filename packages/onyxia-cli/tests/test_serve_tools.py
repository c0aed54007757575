"""Tool calling through the real `openai` client, one server per family fixture (its tool-aware template):
the tools reach the prompt through the model's template, a client's call and the tool's result are fed
back as transformers renders them (arguments as objects), streamed answers equal whole ones; every bad
tool field is a 400 naming it, and so is every field the server does not know."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from serve_cases import reference, running, tiny_session
from tool_cases import TEMPLATES, TOOLS, WEATHER, tool_session

from onyxia.cli.serve import create_app

ASK = [{"role": "user", "content": "Weather in Rome?"}]
WEATHER_TOOL = TOOLS[:1]  # Llama's template spells tools out with indent 4: two fill its 512-token context
CALL_ID = "abcdefgh0"  # 9 letters and digits: Mistral's template checks its call ids
ARGUMENTS = {"city": "Rome", "days": 3}


def _call(arguments: Any) -> dict[str, Any]:
    return {"id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}


CALLED: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [_call(json.dumps(ARGUMENTS))]}
RESULT: dict[str, Any] = {"role": "tool", "tool_call_id": CALL_ID, "content": "sunny"}
# the same turns as transformers' templates read them: arguments decoded, the tool's name beside its result
TEMPLATE_TURNS: list[dict[str, Any]] = [
    {"role": "assistant", "content": "", "tool_calls": [_call(ARGUMENTS)]},
    {**RESULT, "name": "get_weather"},
]


@pytest.fixture(scope="module", params=sorted(TEMPLATES))
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    session = tool_session(request.param, tmp_path_factory.getbasetemp() / "tool-models")
    app = create_app(session=session)
    with running(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        yield app, client


def _ids(app: Any, messages: list[dict[str, Any]], tools: Any = WEATHER_TOOL) -> list[int]:
    tokenizer = app.state.onyxia.session.tokenizer
    return list(tokenizer.encode_chat_turn(tokenizer.render_chat(messages, tools=tools)))


def _streamed(client: Any, **request: Any) -> tuple[str, list[dict[str, Any]], str | None]:
    """Content, calls ({id, name, arguments}) and finish reason, put back together from the deltas."""
    content, reason = "", None
    calls: list[dict[str, Any]] = []
    for chunk in client.chat.completions.create(stream=True, **request):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for part in delta.tool_calls or []:
            if part.id is not None:
                assert part.index == len(calls) and part.type == "function" and part.function.name
                calls.append({"id": part.id, "name": part.function.name, "arguments": ""})
            calls[part.index]["arguments"] += part.function.arguments or ""
        reason = chunk.choices[0].finish_reason or reason
    return content, calls, reason


def _whole(answer: Any) -> tuple[str, list[dict[str, Any]], str | None]:
    message = answer.choices[0].message
    calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []]
    return message.content or "", calls, answer.choices[0].finish_reason


def _without_ids(answer: tuple[str, list[dict[str, Any]], str | None]) -> Any:
    return answer[0], [(c["name"], c["arguments"]) for c in answer[1]], answer[2]


def test_auto_renders_the_tools_and_streams_as_it_answers(served: tuple[Any, Any]) -> None:
    app, client = served
    request = {"model": "m", "messages": ASK, "tools": WEATHER_TOOL, "temperature": 0, "max_tokens": 12}
    answer = client.chat.completions.create(**request)
    ids = _ids(app, ASK)
    assert answer.usage.prompt_tokens == len(ids) > len(_ids(app, ASK, None)) + 40  # the tools are in the prompt
    text, _ = reference(app, ids, 12)
    plan_content, plan_calls = _plan(app, request).answer(text)
    whole = _whole(answer)
    assert _without_ids(whole)[:2] == (
        plan_content or "",
        [(c.function.name, c.function.arguments) for c in plan_calls],
    )
    assert _without_ids(_streamed(client, **request)) == _without_ids(whole)


def test_a_call_and_its_result_are_fed_back_through_the_template(served: tuple[Any, Any]) -> None:
    app, client = served
    messages = [*ASK, CALLED, RESULT]
    request = {"model": "m", "messages": messages, "tools": WEATHER_TOOL, "temperature": 0, "max_tokens": 8}
    answer = client.chat.completions.create(**request)
    ids = _ids(app, [*ASK, *TEMPLATE_TURNS])
    assert answer.usage.prompt_tokens == len(ids)
    text, _ = reference(app, ids, 8)
    content, calls = _plan(app, request).answer(text)
    assert (answer.choices[0].message.content or "", len(answer.choices[0].message.tool_calls or [])) == (
        content or "",
        len(calls),
    )
    assert _without_ids(_streamed(client, **request)) == _without_ids(_whole(answer))


def _valid_calls(calls: list[dict[str, Any]]) -> None:
    import jsonschema  # type: ignore[import-untyped]

    assert calls
    for call in calls:
        assert call["name"] == "get_weather" and call["id"]
        jsonschema.validate(json.loads(call["arguments"]), WEATHER)


def test_required_round_trip(served: tuple[Any, Any]) -> None:
    """A forced call parses and validates however gibberish the model; its result goes back; an answer."""
    app, client = served
    request = {"model": "m", "messages": ASK, "tools": WEATHER_TOOL, "temperature": 0, "max_tokens": 120}
    answer = client.chat.completions.create(**request, tool_choice="required", parallel_tool_calls=False)
    content, calls, reason = _whole(answer)
    assert reason == "tool_calls" and len(calls) == 1 and not content
    _valid_calls(calls)
    streamed = _streamed(client, **request, tool_choice="required", parallel_tool_calls=False)
    assert _without_ids(streamed) == _without_ids((content, calls, reason))
    message = answer.choices[0].message  # fed back as the SDK returned it, as agent code does
    results = [{"role": "tool", "tool_call_id": c.id, "content": "sunny"} for c in message.tool_calls or []]
    final = client.chat.completions.create(**{**request, "messages": [*ASK, message, *results], "max_tokens": 8})
    turn = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.loads(c["arguments"])}}
            for c in calls]  # fmt: skip
    fed: list[dict[str, Any]] = [*ASK, {"role": "assistant", "content": "", "tool_calls": turn}]
    fed.append({**results[0], "name": "get_weather"})
    assert final.usage.prompt_tokens == len(_ids(app, fed))
    assert final.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_a_named_choice_is_a_call_the_parser_reads(served: tuple[Any, Any]) -> None:
    """The model's own output holds the call (forced by the grammar of the named function): parsed into
    tool_calls, whole and streamed, parallel calls where the family allows them."""
    app, client = served
    named = {"type": "function", "function": {"name": "get_weather"}}
    request = {"model": "m", "messages": ASK, "tools": WEATHER_TOOL, "temperature": 0, "max_tokens": 120}
    whole = _whole(client.chat.completions.create(**request, tool_choice=named))
    assert whole[2] == "tool_calls" and not whole[0]  # greedy: gemma2's answer holds two calls
    _valid_calls(whole[1])
    assert _without_ids(_streamed(client, **request, tool_choice=named)) == _without_ids(whole)


def _plan(app: Any, request: dict[str, Any]) -> Any:
    from onyxia.cli.serve.schemas import ChatCompletionRequest
    from onyxia.cli.serve.tool_calls import tool_plan

    body = ChatCompletionRequest.model_validate_json(json.dumps({k: v for k, v in request.items() if k != "model"}))
    return tool_plan(app.state.onyxia.session, body)


# ----- refusals: one server (qwen2), and one whose template shows no tools --------------------------------
@pytest.fixture(scope="module")
def qwen_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A session of its own (another copy): never two engines on one session, whatever order tests run in."""
    with running(create_app(session=tool_session("qwen2", tmp_path_factory.getbasetemp() / "tool-models-2"))) as url:
        yield url


def test_the_sdks_parse_reads_a_forced_call_into_a_pydantic_model(qwen_url: str) -> None:
    """`client.chat.completions.parse(tools=[openai.pydantic_function_tool(Model)])`: the SDK's strict
    function tools, as agent code writes them."""
    from typing import Literal

    from pydantic import BaseModel, Field

    class GetWeather(BaseModel):
        city: Literal["Paris", "Rome"]
        days: int = Field(ge=1, le=7)

    client = openai.OpenAI(base_url=f"{qwen_url}/v1", api_key="unused", max_retries=0, timeout=120)
    answer = client.chat.completions.parse(
        model="m", messages=[{"role": "user", "content": "Weather in Rome?"}],
        tools=[openai.pydantic_function_tool(GetWeather)], tool_choice="required",
        temperature=0, max_tokens=120,
    )  # fmt: skip
    calls = answer.choices[0].message.tool_calls or []
    assert answer.choices[0].finish_reason == "tool_calls" and calls
    assert all(isinstance(c.function.parsed_arguments, GetWeather) for c in calls)


def _tool(name: str = "get_weather", parameters: Any = None, **function: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, **({"parameters": parameters} if parameters else {}), **function},
    }


BAD = [
    # (case, body fields beside messages, param)
    ("choice names no tool", {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice.function.name"),
    ("choice of another type", {"tools": TOOLS, "tool_choice": {"type": "code", "function": {"name": "get_time"}}},
     "tool_choice.type"),
    ("choice without tools", {"tool_choice": "required"}, "tool_choice"),
    ("bad parameters schema", {"tools": [_tool(parameters={"type": "object", "properties": {"a": {"type": "wat"}}})]},
     "tools.0.function.parameters"),
    ("unresolvable $ref", {"tools": [_tool(parameters={"type": "object", "properties": {"a": {"$ref": "#/x"}}})]},
     "tools.0.function.parameters"),
    ("parameters not an object", {"tools": [_tool(parameters={"type": "string"})]}, "tools.0.function.parameters"),
    ("tool of another type", {"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, "tools.0.type"),
    ("bad function name", {"tools": [_tool("get weather")]}, "tools.0.function.name"),
    ("a name twice", {"tools": [_tool("f"), _tool("f")]}, "tools.1.function.name"),
    ("unknown field", {"tools": TOOLS, "functions": []}, "functions"),
    ("unknown field in a tool", {"tools": [_tool(returns="x")]}, "tools.0.function.returns"),
    ("unknown field in a named choice",
     {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_time"}, "why": 1}}, "tool_choice.why"),
    ("store true", {"store": True}, "store"),
    ("a forced call beside an output constraint",
     {"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice"),
]  # fmt: skip
BAD_MESSAGES: list[tuple[str, list[dict[str, Any]], str]] = [
    ("tool result answering no call", [*ASK, RESULT], "messages.1.tool_call_id"),
    ("tool result without its id", [*ASK, CALLED, {"role": "tool", "content": "x"}], "messages.2.tool_call_id"),
    ("arguments that are no JSON object",
     [*ASK, {**CALLED, "tool_calls": [_call("[1")]}],
     "messages.1.tool_calls.0.function.arguments"),
    ("tool calls on a user message", [{**ASK[0], "tool_calls": CALLED["tool_calls"]}], "messages.0.tool_calls"),
    ("unknown field in a message", [{**ASK[0], "refusal": "no"}], "messages.0.refusal"),
]  # fmt: skip


def _refused(url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{url}/v1/chat/completions", json={"max_tokens": 2, **body}, timeout=60)
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize(("case", "fields", "param"), BAD, ids=[c[0] for c in BAD])
def test_bad_tool_fields_are_400_naming_them(qwen_url: str, case: str, fields: dict[str, Any], param: str) -> None:
    assert _refused(qwen_url, {"messages": ASK, **fields})["param"] == param


@pytest.mark.parametrize(("case", "messages", "param"), BAD_MESSAGES, ids=[c[0] for c in BAD_MESSAGES])
def test_bad_tool_turns_are_400_naming_them(qwen_url: str, case: str, messages: list[Any], param: str) -> None:
    assert _refused(qwen_url, {"messages": messages, "tools": TOOLS})["param"] == param


def test_fields_with_a_documented_meaning_are_accepted(qwen_url: str) -> None:
    body = {"messages": ASK, "max_tokens": 2, "user": "u-17", "metadata": {"team": "a"}, "store": False}
    response = httpx.post(f"{qwen_url}/v1/chat/completions", json={**body, "tools": TOOLS, "tool_choice": "none"})
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["tool_calls"] is None
    response = httpx.post(f"{qwen_url}/v1/completions", json={"prompt": "a", "max_tokens": 2, "user": "u-17"})
    assert response.status_code == 200
    error = httpx.post(f"{qwen_url}/v1/completions", json={"prompt": "a", "best_of": 2}).json()["error"]
    assert error["param"] == "best_of" and "best_of" in error["message"]


def test_a_template_that_shows_no_tools_refuses_them() -> None:
    with running(create_app(session=tiny_session())) as url:
        error = _refused(url, {"messages": ASK, "tools": TOOLS})
        assert error["param"] == "tools" and "template" in error["message"]
