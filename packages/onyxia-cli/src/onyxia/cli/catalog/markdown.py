"""The catalog as Markdown: the operator tables, the pass table and the counts prose quotes.

Generated text sits in a page between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``
(`replace_block`); a block whose text has no newline is inline (a count inside a sentence).
`tools/docs_tables.py` fills every block of the pages it knows, and `tests/test_docs_tables.py` checks
that a committed page equals what these functions render.
"""

from __future__ import annotations

import re
from collections import Counter

from onyxia.cli.catalog.operators import Catalog, domain_name
from onyxia.cli.catalog.passes import PassRow

__all__ = ["counts", "missing_table", "pass_table", "replace_block", "supported_table"]

_ONYXIA = "com.onyxia"


def supported_table(catalog: Catalog) -> str:
    """One table per domain: op, the opsets it serves, the module implementing it."""
    parts = []
    for domain in sorted({r.domain for r in catalog.supported}):
        rows = [r for r in catalog.supported if r.domain == domain]
        note = " (produced by Onyxia's passes, never written by exporters)" if domain == _ONYXIA else ""
        parts.append(f"### {domain_name(domain)}: {len({r.op_type for r in rows})} operators{note}\n")
        parts.append("| operator | opsets | implemented in |\n|---|---|---|")
        parts += [f"| {r.op_type} | {r.opsets} | `{r.module}` |" for r in rows]
        parts.append("")
    return "\n".join(parts).rstrip()


def missing_table(catalog: Catalog) -> str:
    """What the schemas define and no registration serves, per domain; versions when only some are missing."""
    sources = ", ".join(f"{k} {v}" for k, v in sorted(catalog.sources.items()))
    parts = [f"Compared with the schemas of {sources}."]
    parts += [f"Not compared: {domain_name(d)} ({why})." for d, why in sorted(catalog.unchecked.items())]
    parts.append("\n| domain | operator | missing opset versions | note |\n|---|---|---|---|")
    for r in catalog.missing:
        note = ", ".join(n for n, on in (("older versions only", r.partial), ("deprecated", r.deprecated)) if on)
        parts.append(f"| {domain_name(r.domain)} | {r.op_type} | {r.opsets} | {note} |")
    return "\n".join(parts)


def pass_table(rows: list[PassRow]) -> str:
    """Every pass in the order a compile runs it, then the LLM session's."""
    lines = ["| stage | pass | rules (module: names) | what it does |", "|---|---|---|---|"]
    for row in rows:
        scope = "" if row.scope == "every compile" else f" ({row.scope})"
        rules = "; ".join(f"`{m}`: {', '.join(names)}" for m, names in row.rules) or "-"
        purpose = row.purpose.replace("|", "\\|")
        lines.append(f"| {row.stage}{scope} | {row.name} (`{row.module}`) | {rules} | {purpose} |")
    return "\n".join(lines)


def counts(catalog: Catalog, rows: list[PassRow]) -> dict[str, str]:
    """Inline figures: operators per domain (distinct op types), whole ops missing, passes per compile."""
    per_domain = Counter(d for d, _ in {(r.domain, r.op_type) for r in catalog.supported})
    missing = Counter(r.domain for r in catalog.missing if not r.partial)
    return {
        "ops-onnx": str(per_domain[""]),
        "ops-microsoft": str(per_domain["com.microsoft"]),
        "ops-onyxia": str(per_domain[_ONYXIA]),
        "ops-total": str(sum(per_domain.values())),
        "ops-missing-onnx": str(missing[""]),
        "passes-per-compile": str(sum(r.scope == "every compile" for r in rows)),
    }


def replace_block(text: str, name: str, content: str, where: str = "page") -> str:
    """`text` with the block `name` holding `content`; a missing or doubled marker is an error naming both."""
    pattern = re.compile(rf"(<!-- generated:{re.escape(name)} -->)(.*?)(<!-- /generated:{re.escape(name)} -->)", re.S)
    found = pattern.findall(text)
    if len(found) != 1:
        raise ValueError(f"{where}: expected one <!-- generated:{name} --> ... <!-- /generated:{name} --> block")
    body = f"\n{content}\n" if "\n" in content or "\n" in found[0][1] else content
    return pattern.sub(lambda m: m.group(1) + body + m.group(3), text)
