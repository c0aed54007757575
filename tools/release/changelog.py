"""What a package's CHANGELOG.md announces as breaking in its "Unreleased" section.

The changelogs follow Keep a Changelog (https://keepachangelog.com/en/1.1.0/): a level-2 heading per
release, newest first, ``## [Unreleased]`` on top, and level-3 headings grouping the entries. Onyxia
adds one group, ``### Breaking``, for changes that break a public signature; the API check
(`api_check.py`) reads the symbols it names: every inline code span (text in single backticks) of
that group, e.g. ``- `onyxia.core.OperatorRegistry.register`: `domain` is keyword-only.``
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["BREAKING_HEADING", "UNRELEASED_HEADING", "announced_breaking", "released_versions"]

UNRELEASED_HEADING = "Unreleased"
BREAKING_HEADING = "Breaking"
_H2 = re.compile(r"^##\s+\[?([^\]\s]+)\]?(.*)$")
_H3 = re.compile(r"^###\s+(.+?)\s*$")
_CODE = re.compile(r"`([^`\n]+)`")


def _sections(text: str) -> dict[str, list[str]]:
    """Level-2 sections by their first word ("Unreleased", "0.1.0"), each as its lines."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else _H2.match(line)
        if match:
            current = sections.setdefault(match.group(1), [])
        elif current is not None:
            current.append(line)
    return sections


def announced_breaking(changelog: Path) -> set[str]:
    """Symbols named in backticks under ``### Breaking`` in the ``## [Unreleased]`` section (empty if none)."""
    if not changelog.is_file():
        return set()
    lines = next(
        (body for title, body in _sections(changelog.read_text()).items() if title.lower() == "unreleased"), []
    )
    found: set[str] = set()
    inside = False
    for line in lines:
        heading = _H3.match(line)
        if heading:
            inside = heading.group(1).strip().lower() == BREAKING_HEADING.lower()
        elif inside:
            found.update(span.strip() for span in _CODE.findall(line))
    return found


def released_versions(changelog: Path) -> list[str]:
    """The version headings of `changelog` (not "Unreleased"), in file order: newest first."""
    return [title for title in _sections(changelog.read_text()) if title.lower() != "unreleased"]
