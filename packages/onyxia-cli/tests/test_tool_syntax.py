"""The tool-call syntax table against each family's template: a call the template renders is what the parser
reads back and what the forcing grammar accepts, token by token, on the fixture's own tokenizer; a call of
another function or with arguments outside the schema is refused by the grammar; prose stays content."""

from __future__ import annotations

from typing import Any

import pytest
from llm_cases import DATA
from tool_cases import CALLS, SCHEMAS, TEMPLATES, WEATHER, rendered_answer, template_tokenizer

from onyxia.cli.llm.families import FAMILIES
from onyxia.cli.llm.tool_grammar import check_parameters, tool_grammar
from onyxia.cli.llm.tool_syntax import TOOL_SYNTAXES, ParsedCall, parse_tool_calls, tool_syntax_of


def _matcher(family: str, grammar: str) -> Any:
    from llguidance import LLMatcher, LLTokenizer

    tokenizer = LLTokenizer((DATA / f"{family}-tiny-optimum" / "tokenizer.json").read_text())
    matcher = LLMatcher(tokenizer, LLMatcher.grammar_from_lark(grammar))
    assert not matcher.is_error(), matcher.get_error()
    return tokenizer, matcher


def _accepts(family: str, grammar: str, text: str) -> bool:
    tokenizer, matcher = _matcher(family, grammar)
    ids = tokenizer.tokenize_str(text)
    return bool(matcher.try_consume_tokens(ids) == len(ids) and matcher.is_accepting())


def test_every_family_has_one_row() -> None:
    covered = [f for row in TOOL_SYNTAXES for f in row.families]
    assert sorted(covered) == sorted(f.name for f in FAMILIES)


@pytest.mark.parametrize("family", sorted(TEMPLATES))
def test_the_templates_call_parses_back_and_the_grammar_accepts_it(family: str) -> None:
    syntax = tool_syntax_of(family)
    assert syntax is not None
    calls = CALLS[:1] if syntax.single else CALLS
    answer = rendered_answer(family, calls)
    parsed = parse_tool_calls(answer, syntax)
    assert list(parsed.calls) == calls and parsed.content == "", answer
    tokenizer = template_tokenizer(family)
    grammar = tool_grammar(syntax, SCHEMAS, parallel=True, token_id=tokenizer.token_id)
    assert _accepts(family, grammar, answer), (answer, grammar)
    if len(calls) > 1:  # parallel_tool_calls false: one call only
        single = tool_grammar(syntax, SCHEMAS, parallel=False, token_id=tokenizer.token_id)
        assert not _accepts(family, single, answer)
        assert _accepts(family, single, rendered_answer(family, calls[:1]))


@pytest.mark.parametrize("family", sorted(TEMPLATES))
def test_the_grammar_refuses_other_functions_and_arguments_outside_the_schema(family: str) -> None:
    syntax = tool_syntax_of(family)
    assert syntax is not None
    tokenizer = template_tokenizer(family)
    named = tool_grammar(syntax, {"get_weather": WEATHER}, parallel=True, token_id=tokenizer.token_id)
    assert _accepts(family, named, rendered_answer(family, CALLS[:1]))
    assert not _accepts(family, named, rendered_answer(family, CALLS[1:]))  # not the named function
    for bad in ({"city": "Oslo", "days": 3}, {"city": "Rome", "days": 8}, {"city": "Rome"}):
        answer = rendered_answer(family, [ParsedCall("get_weather", bad)])
        assert not _accepts(family, named, answer), answer
        assert parse_tool_calls(answer, syntax).calls  # the parser reads it: "auto" does not check arguments


@pytest.mark.parametrize("family", sorted(TEMPLATES))
def test_prose_and_broken_calls_are_content(family: str) -> None:
    syntax = tool_syntax_of(family)
    assert syntax is not None
    call = rendered_answer(family, CALLS[:1])
    texts = [
        "It is sunny in Rome.",
        call[: len(call) - 3],  # cut short (max_tokens)
        call.replace('"get_weather"', "get_weather"),  # not JSON
        call + "\nand more prose after the call",
    ]
    for text in texts:
        assert parse_tool_calls(text, syntax) == (parse_tool_calls(text, syntax).__class__(text, ())), text
    if syntax.start:  # text before a call stays content; trailing whitespace before the marker goes
        parsed = parse_tool_calls("Let me look.\n\n" + call, syntax)
        assert parsed.content == "Let me look." and list(parsed.calls) == CALLS[:1]


def test_a_json_answer_that_is_no_call_is_content() -> None:
    llama = tool_syntax_of("llama")
    assert llama is not None
    for text in ('{"city": "Rome"}', '{"name": "f", "parameters": [1]}', '{"name": "", "parameters": {}}', "[]"):
        assert parse_tool_calls(text, llama).calls == ()
    assert parse_tool_calls('{"name": "f", "parameters": "{\\"a\\": 1}"}', llama).calls == (ParsedCall("f", {"a": 1}),)


def test_check_parameters_names_what_llguidance_rejects() -> None:
    assert check_parameters(WEATHER) is None
    assert "objec" in str(check_parameters({"type": "objec"}))
    assert "/nowhere" in str(check_parameters({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}))


def _cell(text: str) -> str:
    """A markdown table cell's code span (4 backticks where the code holds backticks), `(none)` as ""."""
    text = text.strip().replace("\\|", "|")
    fence = "````" if text.startswith("````") else "`"
    return "" if text == "(none)" else text[len(fence) : -len(fence)].strip()


def test_the_docs_table_is_the_code_table() -> None:
    docs = DATA.parents[3] / "docs" / "serving" / "tools.md"
    section = docs.read_text().split("## Call syntax per family")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| families")]
    documented = []
    for line in rows:
        cells = [c for c in line.replace("\\|", "\0").split("|")[1:-1]]
        families, start, end, key, block = (c.replace("\0", "\\|") for c in cells[:5])
        documented.append(
            (tuple(families.strip().split(", ")), _cell(start), _cell(end), _cell(key), block.strip() == "a JSON list")
        )
    assert documented == [(s.families, s.start, s.end, s.arguments_key, s.listed) for s in TOOL_SYNTAXES]
