"""mkdocs hook: nav entries for pages that other branches are adding stay out of the nav until the file exists.

mkdocs.yml lists such pages under `extra.pending_pages` (and in `nav` where they belong). While one is
missing, its nav entry is dropped (an INFO line names it) instead of failing the strict build; once the
page lands, it appears where the nav puts it with no other edit. Every other nav entry is still checked:
a missing page that is not listed is the usual strict-mode failure. Empty the list once all have landed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

__all__ = ["on_config"]

log = logging.getLogger("mkdocs.hooks.pending_nav")


def on_config(config: Any) -> Any:
    pending = set(config.extra.get("pending_pages") or ())
    docs = Path(config.docs_dir)
    missing = {page for page in pending if not (docs / page).is_file()}
    for page in sorted(missing):
        log.info("pending page %s is not in docs/ yet: left out of the nav", page)
    if missing and config.nav:
        config.nav = _without(config.nav, missing)
    return config


def _without(items: list[Any], missing: set[str]) -> list[Any]:
    """`items` (mkdocs' nav: strings and one-key dicts of a page or a sub-list) minus the missing pages."""
    kept: list[Any] = []
    for item in items:
        if isinstance(item, str):
            if item not in missing:
                kept.append(item)
            continue
        ((title, value),) = item.items()
        if isinstance(value, list):
            value = _without(value, missing)
            if value:
                kept.append({title: value})
        elif value not in missing:
            kept.append(item)
    return kept
