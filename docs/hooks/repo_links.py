"""mkdocs hook: a page made of a repository-root file (ARCHITECTURE.md), one copy of the text, links intact.

A page whose front matter says `include: FILE` (a path from the repository root) gets FILE's text as its
body at build time. The file links as GitHub reads it, from the repository root: a link into `docs/`
becomes the site page's relative link, and a link to any other repository file (not part of the site)
becomes its path in code, so the strict build neither fails on it nor serves a dead link.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

__all__ = ["on_page_markdown"]

LINK = re.compile(r"\[([^\]]+)\]\(([^)\s#:]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    name = page.meta.get("include")
    if not name:
        return markdown
    source = Path(config.config_file_path).resolve().parent / name
    if not source.is_file():
        raise PluginError(f"{page.file.src_uri}: include: {name} is not a file of the repository")
    here = posixpath.dirname(page.file.src_uri) or "."

    def fix(match: re.Match[str]) -> str:
        text, target, anchor = match.group(1), match.group(2), match.group(3) or ""
        if target.startswith("docs/"):
            return f"[{text}]({posixpath.relpath(target[len('docs/') :], here)}{anchor})"
        plain = text.strip("`")
        return f"`{target}`" if plain == target else f"{text} (`{target}`)"

    return LINK.sub(fix, source.read_text(encoding="utf-8"))
