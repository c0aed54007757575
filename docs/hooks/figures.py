"""mkdocs hook: pages quote measured figures through markers, filled from docs/data/*.json at build time.

    {{ table:NAME }}       a table (figures_tables.TABLES, or bench:<run id>) with its dates and commands
    {{ figure:KEY }}       one figure in prose: dataset/run-id/dotted.path, or summary/NAME
    {{ plot:NAME }}        an SVG drawn by figures_plots.PLOTS, added to the site as figures/NAME.svg

An unknown marker, run or figure stops the build (a PluginError naming the page and the marker), so no
page can quote a number that the JSON does not hold.
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures_plots import PLOTS
from figures_tables import figure, load, render_table

__all__ = ["on_files", "on_page_markdown"]

MARKER = re.compile(r"\{\{\s*(table|figure|plot):([^}\s]+)\s*\}\}")


def on_files(files: Files, config: Any) -> Files:
    data = load()
    for name, draw in PLOTS.items():
        files.append(File.generated(config, f"figures/{name}.svg", content=draw(data)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    data = load()
    here = posixpath.dirname(page.file.src_uri)

    def fill(match: re.Match[str]) -> str:
        text = _render(match)
        line_start = markdown.rfind("\n", 0, match.start()) + 1
        indent = markdown[line_start : match.start()]
        return text.replace("\n", "\n" + indent) if indent.isspace() else text  # inside an admonition

    def _render(match: re.Match[str]) -> str:
        kind, key = match.group(1), match.group(2)
        try:
            if kind == "table":
                return str(render_table(data, key))
            if kind == "figure":
                return str(figure(data, key))
            if key not in PLOTS:
                raise KeyError(f"no plot {key!r}")
            return f"![{key}]({posixpath.relpath(f'figures/{key}.svg', here or '.')})"
        except (KeyError, ValueError, TypeError) as e:
            raise PluginError(f"{page.file.src_uri}: {match.group(0)}: {e}") from e

    return MARKER.sub(fill, markdown)
