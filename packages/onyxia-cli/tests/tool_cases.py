"""The family fixtures with chat templates that render tools, for the tool-calling tests.

The fixtures' own templates (shared/fixtures) are the families' plain chat templates: none reads
`tools`. `data/tool_templates/` holds each family's tool-aware template in its upstream form (Qwen2.5's,
Llama 3.2's, Mistral-7B-Instruct-v0.3's; Phi-4-mini's shape reading the `tools` variable; for Gemma,
whose templates have no tools, the tool_code convention of Google's function-calling guide). A case is
the optimum export of the family copied beside such a template.
"""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

from llm_cases import DATA

from onyxia.cli.llm.tokenizer import TextTokenizer
from onyxia.cli.llm.tool_syntax import ParsedCall

__all__ = [
    "CALLS",
    "QUESTION",
    "SCHEMAS",
    "TEMPLATES",
    "TOOLS",
    "WEATHER",
    "rendered_answer",
    "template_tokenizer",
    "tool_model_dir",
    "tool_session",
]

TEMPLATES = {
    "qwen2": "qwen",
    "qwen3": "qwen",  # Qwen3 renders tools and calls as Qwen2.5 does
    "llama": "llama",
    "mistral": "mistral",
    "phi3": "phi3",
    "gemma2": "gemma",
}

# small schemas: the fixtures' context is 512 tokens, their tiny vocabularies spell JSON a few characters a
# token, and Llama's template prints tools with indent 4 (hence no `"type": "object"`, which is implied);
# bounded values and no extra keys, so that a forced call of a random-weight model ends
WEATHER: dict[str, Any] = {
    "properties": {"city": {"enum": ["Paris", "Rome"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
]


def tool_model_dir(family: str, root: Path) -> Path:
    """`{family}-tiny-optimum` with its tool-aware chat template, under `root`."""
    source, target = DATA / f"{family}-tiny-optimum", root / family
    if not target.is_dir():
        shutil.copytree(source, target)
        (target / "chat_template.jinja").write_text(
            (DATA / "tool_templates" / f"{TEMPLATES[family]}.jinja").read_text()
        )
    return target


QUESTION = [{"role": "user", "content": "Weather in Rome, then the time?"}]
CALLS = [ParsedCall("get_weather", {"city": "Rome", "days": 3}), ParsedCall("get_time", {})]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def template_tokenizer(family: str) -> TextTokenizer:
    root = DATA / f"{family}-tiny-optimum"
    config = json.loads((root / "tokenizer_config.json").read_text())
    template = (DATA / "tool_templates" / f"{TEMPLATES[family]}.jinja").read_text()
    return TextTokenizer(root / "tokenizer.json", config, template, root)


def _eos_texts(family: str, tokenizer: TextTokenizer) -> list[str]:
    config = json.loads((DATA / f"{family}-tiny-optimum" / "generation_config.json").read_text())
    ids = config["eos_token_id"] if isinstance(config["eos_token_id"], list) else [config["eos_token_id"]]
    extra = [i for i in [tokenizer.token_id("<end_of_turn>")] if i is not None]
    return [t for i in ids + extra if (t := tokenizer.special_text(i) or tokenizer.decode([i]))]


def rendered_answer(family: str, calls: list[ParsedCall]) -> str:
    """The assistant turn the template writes for `calls`, up to its end-of-turn token: what the model
    learned to emit (ids of 9 letters, which Mistral's template insists on)."""
    tokenizer = template_tokenizer(family)
    tool_calls = [
        {"id": f"abcdefgh{i}", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for i, c in enumerate(calls)
    ]
    turn = {"role": "assistant", "content": "", "tool_calls": tool_calls}
    prompt = tokenizer.render_chat(QUESTION, tools=TOOLS)
    whole = tokenizer.render_chat([*QUESTION, turn], add_generation_prompt=False, tools=TOOLS)
    assert whole.startswith(prompt), f"{family}: the template renders the prompt differently in a longer chat"
    answer = whole[len(prompt) :]
    ends = [at for t in _eos_texts(family, tokenizer) if (at := answer.find(t)) >= 0]
    return answer[: min(ends)] if ends else answer


@cache
def tool_session(family: str, root: Path) -> Any:
    from onyxia.cli.llm import LlmSession

    return LlmSession.from_pretrained(tool_model_dir(family, root), None, max_length=512)
