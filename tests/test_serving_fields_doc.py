"""docs/serving/index.md's request-field table names exactly the fields the chat and text completion request
models declare (a field added to a model without a line here, or a line for a field that is gone, fails)."""

from __future__ import annotations

import re
from pathlib import Path

from onyxia.cli.serve.schemas import ChatCompletionRequest, CompletionRequest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "serving" / "index.md"


def _documented() -> dict[str, set[str]]:
    """field -> the endpoints its row names ("chat", "text")."""
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("## Request fields") : text.index("## Errors")]
    found: dict[str, set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([a-z_]+)`", cells[0])
        scopes = [part.strip() for part in cells[1].split("/")]
        for i, name in enumerate(names):
            scope = scopes[min(i, len(scopes) - 1)]
            found[name] = {"chat", "text"} if scope == "both" else {scope}
    return found


def test_every_request_field_is_documented_once() -> None:
    documented = _documented()
    chat, text = set(ChatCompletionRequest.model_fields), set(CompletionRequest.model_fields)
    assert set(documented) == chat | text, (
        f"undocumented: {sorted((chat | text) - set(documented))}; gone: {sorted(set(documented) - (chat | text))}"
    )
    for name, scopes in documented.items():
        assert ("chat" in scopes) == (name in chat) and ("text" in scopes) == (name in text), name
