"""`onyxia ops [--missing] [--domain D] [--json | --markdown]`: the operators Onyxia runs, or those it lacks.

The list is the registry's (built-ins and every installed ``onyxia.operators`` plugin): domain, op type,
the opsets each registration serves and the module implementing it. ``--missing`` lists what onnx's
schemas and onnxruntime's contrib schemas define that no registration serves: whole ops, and ops of
which only older versions run. The docs' operator page is this output as Markdown
(`onyxia.cli.catalog.markdown`, written by `tools/docs_tables.py`).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from onyxia.cli.catalog import Catalog, operator_catalog
from onyxia.cli.catalog.markdown import missing_table, supported_table
from onyxia.cli.catalog.operators import domain_name
from onyxia.cli.common import operator_registry
from onyxia.core import InputError

__all__ = ["add_parser", "run"]

NAME = "ops"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        NAME, help="list the supported operators (domain, name, opsets); --missing: those onnx defines and Onyxia lacks"
    )
    parser.add_argument(
        "--missing", action="store_true", help="list what onnx/onnxruntime schemas define and Onyxia lacks"
    )
    parser.add_argument("--domain", metavar="D", help="only this domain (ai.onnx, com.microsoft, com.onyxia, ...)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON (one object per row)")
    output.add_argument("--markdown", action="store_true", help="print the Markdown tables the docs use")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    catalog = _only(operator_catalog(operator_registry()), args.domain)
    if args.json:
        rows = catalog.missing if args.missing else catalog.supported
        extra = {"sources": catalog.sources, "unchecked": catalog.unchecked} if args.missing else {}
        print(json.dumps({"operators": [_json_row(asdict(r)) for r in rows], **extra}, indent=1))
    elif args.markdown:
        print(missing_table(catalog) if args.missing else supported_table(catalog))
    elif args.missing:
        _print_missing(console, catalog)
    else:
        _print_supported(console, catalog)
    return 0


def _only(catalog: Catalog, domain: str | None) -> Catalog:
    if domain is None:
        return catalog
    wanted = "" if domain == "ai.onnx" else domain
    if wanted not in catalog.domains():
        known = ", ".join(domain_name(d) for d in catalog.domains())
        raise InputError(f"--domain: no operators of domain {domain!r}; domains: {known}")
    return Catalog(
        tuple(r for r in catalog.supported if r.domain == wanted),
        tuple(r for r in catalog.missing if r.domain == wanted),
        catalog.sources,
        {d: why for d, why in catalog.unchecked.items() if d == wanted},
    )


def _json_row(row: dict[str, object]) -> dict[str, object]:
    return {**row, "domain": domain_name(str(row["domain"]))}


def _print_supported(console: Console, catalog: Catalog) -> None:
    table = Table(title_justify="left")
    for column in ("domain", "operator", "opsets", "implemented in"):
        table.add_column(column)
    for r in catalog.supported:
        table.add_row(escape(domain_name(r.domain)), escape(r.op_type), r.opsets, escape(r.module))
    console.print(table)
    kinds = len({(r.domain, r.op_type) for r in catalog.supported})
    console.print(f"{kinds} operators ({len(catalog.supported)} registrations); `onyxia ops --missing`: what is not")


def _print_missing(console: Console, catalog: Catalog) -> None:
    table = Table(title_justify="left")
    for column in ("domain", "operator", "missing opset versions", "note"):
        table.add_column(column)
    for r in catalog.missing:
        note = ", ".join(n for n, on in (("older versions only", r.partial), ("deprecated", r.deprecated)) if on)
        table.add_row(escape(domain_name(r.domain)), escape(r.op_type), r.opsets, note)
    console.print(table)
    whole = sum(not r.partial for r in catalog.missing)
    sources = ", ".join(f"{k} {v}" for k, v in sorted(catalog.sources.items()))
    console.print(
        f"{whole} operators missing, {len(catalog.missing) - whole} with only some versions (schemas of {sources})"
    )
    for domain, why in sorted(catalog.unchecked.items()):
        console.print(f"[yellow]{escape(domain_name(domain))} not compared[/]: {escape(why)}")
