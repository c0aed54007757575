"""A request's output constraint: OpenAI's `response_format`, or one of vLLM's `guided_*` extensions.

| field | constraint |
|---|---|
| `response_format: {"type": "text"}` | none (the default) |
| `response_format: {"type": "json_object"}` | any JSON object |
| `response_format: {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}` | that schema (`strict` false: llguidance ignores keywords it lacks instead of refusing them) |
| `guided_json` (a schema, object or JSON text) | that schema |
| `guided_regex` | the regex |
| `guided_choice` (a list of strings) | exactly one of them |
| `guided_grammar` | a Lark grammar (llguidance's dialect) |

More than one at once is a 400 naming the second; a schema, regex or grammar llguidance rejects is a 400 naming
the field, found here, before the request is queued (never a generation that cannot finish).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from onyxia.cli.llm.constraints import Constraint, grammar_tokenizer
from onyxia.cli.serve.errors import ApiError
from onyxia.core import InputError

if TYPE_CHECKING:
    from onyxia.cli.llm.session import LlmSession
    from onyxia.cli.serve.schemas import ChatCompletionRequest, CompletionRequest

__all__ = ["request_constraint"]


def request_constraint(session: LlmSession, body: ChatCompletionRequest | CompletionRequest) -> Constraint | None:
    """The body's constraint, checked against the model's tokenizer; None for plain text."""
    asked = _asked(body)
    if len(asked) > 1:
        names = ", ".join(param for param, _ in asked)
        raise ApiError(400, f"{names} are given together; a request takes one output constraint", param=asked[1][0])
    if not asked:
        return None
    param, build = asked[0]
    try:
        constraint = build()
        constraint.check(grammar_tokenizer(session))
    except InputError as e:
        raise ApiError(400, f"{param}: {e}", param=param) from None
    return constraint


def _asked(body: ChatCompletionRequest | CompletionRequest) -> list[tuple[str, Callable[[], Constraint]]]:
    """(field, how to build its constraint) for each constraint field the body sets, in the table's order."""
    found: list[tuple[str, Callable[[], Constraint]]] = []
    form, schema, regex, choice, grammar = (
        body.response_format,
        body.guided_json,
        body.guided_regex,
        body.guided_choice,
        body.guided_grammar,
    )
    if form is not None and form.type != "text":
        found.append(("response_format", lambda: _response_format(body)))
    if schema is not None:
        found.append(("guided_json", lambda: Constraint.json_schema(_schema(schema, "guided_json"))))
    if regex is not None:
        found.append(("guided_regex", lambda: Constraint.regex(regex)))
    if choice is not None:
        found.append(("guided_choice", lambda: Constraint.choice(choice)))
    if grammar is not None:
        found.append(("guided_grammar", lambda: Constraint.lark(grammar)))
    return found


def _response_format(body: ChatCompletionRequest | CompletionRequest) -> Constraint:
    form = body.response_format
    assert form is not None
    if form.type == "json_object":
        return Constraint.json_object()
    if form.type != "json_schema":
        raise InputError(f"type is {form.type!r}; expected text, json_object or json_schema")
    if form.json_schema is None or form.json_schema.schema_ is None:
        raise InputError("type json_schema needs json_schema.schema (the JSON schema the answer must follow)")
    strict = form.json_schema.strict is not False
    return Constraint.json_schema(_schema(form.json_schema.schema_, "json_schema.schema"), strict)


def _schema(value: dict[str, object] | str, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise InputError(f"{where} is not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise InputError(f"{where} is a {type(value).__name__}; expected a JSON schema object")
    return value
