"""The docs' settings table (docs/settings.md) lists exactly the settings `onyxia.core.settings` reads, with
their fields and defaults (this runs from the checkout, where the docs are; the packages' own tests run
from installed wheels without them)."""

from __future__ import annotations

import re
from pathlib import Path

from onyxia.core.settings import SETTINGS_DOC

SETTINGS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
ROW = re.compile(r"^\|\s*`(ONYXIA_\w+)`\s*\|\s*`(\w+)`\s*\|\s*`([^`]*)`\s*\|\s*(.*?)\s*\|$")


def _table() -> list[tuple[str, str, str, str]]:
    section = SETTINGS_PAGE.read_text(encoding="utf-8")
    return [(m[1], m[2], m[3], m[4]) for line in section.splitlines() if (m := ROW.match(line.strip()))]


def test_settings_page_lists_every_setting_once() -> None:
    rows = _table()
    assert [r[:3] for r in rows] == [doc[:3] for doc in SETTINGS_DOC], "regenerate the table from SETTINGS_DOC"
    assert all(r[3] for r in rows), "every row says what the setting means"
