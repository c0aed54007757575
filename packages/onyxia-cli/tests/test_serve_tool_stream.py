"""Streamed tool answers reassemble to the whole answer, however the text is cut into deltas: each family's
rendered calls, prose, text before a call, broken calls, half a marker that turns out to be prose."""

from __future__ import annotations

import pytest
from tool_cases import CALLS, SCHEMAS, TEMPLATES, rendered_answer

from onyxia.cli.llm.tool_syntax import tool_syntax_of
from onyxia.cli.serve.tool_calls import ToolPlan
from onyxia.cli.serve.tool_stream import ToolStream, call_deltas


def _texts(family: str) -> list[str]:
    syntax = tool_syntax_of(family)
    assert syntax is not None
    call = rendered_answer(family, CALLS[:1] if syntax.single else CALLS)
    marker = syntax.start or "{"
    return [
        call,
        "  \n" + call + "\n",
        "Let me check the weather.\n" + call,
        "It is sunny in Rome, 3 days long.",
        call[: len(call) - 2],
        call + " and some prose",
        f"a {marker[: max(1, len(marker) - 1)]} that is no call",
        "   ",
        "",
    ]


def _split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


@pytest.mark.parametrize("family", sorted(TEMPLATES))
def test_the_stream_reassembles_to_the_whole_answer(family: str) -> None:
    syntax = tool_syntax_of(family)
    assert syntax is not None
    plan = ToolPlan(syntax, dict(SCHEMAS), parallel=True, grammar=None)
    for text in _texts(family):
        content, calls = plan.answer(text)
        for size in (1, 2, 3, 7, len(text) or 1):
            stream = ToolStream(plan)
            sent = "".join(stream.push(piece) for piece in _split(text, size))
            if calls:  # nothing from the first marker on went out as content
                assert sent == (content or "")[: len(sent)]
            tail, streamed = stream.finish()
            assert sent + tail == (content or ""), (text, size)
            assert [c.function for c in streamed] == [c.function for c in calls], (text, size)


def test_call_deltas_open_each_call_then_add_its_arguments() -> None:
    syntax = tool_syntax_of("qwen2")
    assert syntax is not None
    plan = ToolPlan(syntax, dict(SCHEMAS), parallel=True, grammar=None)
    _, calls = plan.answer(rendered_answer("qwen2", CALLS))
    deltas = call_deltas(calls)
    assert [(d.index, d.id, d.type, d.function.name) for d in deltas[::2]] == [
        (i, c.id, "function", c.function.name) for i, c in enumerate(calls)
    ]
    assert all(d.id is None and d.function.name is None for d in deltas[1::2])
    assert [d.function.arguments for d in deltas[1::2]] == [c.function.arguments for c in calls]
    assert all(c.id.startswith("call_") for c in calls) and len({c.id for c in calls}) == len(calls)


def test_parallel_false_keeps_the_first_call_and_mistral_ids_have_nine_letters() -> None:
    syntax = tool_syntax_of("mistral")
    assert syntax is not None
    plan = ToolPlan(syntax, dict(SCHEMAS), parallel=False, grammar=None)
    _, calls = plan.answer(rendered_answer("mistral", CALLS))
    assert [c.function.name for c in calls] == ["get_weather"]
    assert len(calls[0].id) == 9 and calls[0].id.isalnum()
