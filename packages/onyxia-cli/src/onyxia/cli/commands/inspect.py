"""`onyxia inspect MODEL`: what a model takes and returns, which ops it uses, how big it is.

Reads the model through the ONNX front end only (no compile, no GPU), and marks each op type
the installed operators (core plus plugins) do not support, so it doubles as a quick triage.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from onyxia.cli.common import (
    BUILTIN_MODEL_NAME,
    add_model_argument,
    format_bytes,
    graph_symbols,
    load_graph,
    model_path,
    operator_registry,
)
from onyxia.core import IrGraph, OperatorRegistry
from onyxia.core.subgraphs import nodes_within

__all__ = ["add_parser", "run"]

NAME = "inspect"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(NAME, help="show inputs, outputs, op histogram, opsets and parameter count")
    add_model_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    with model_path(args.model) as path:
        graph = load_graph(path)
    title = BUILTIN_MODEL_NAME if args.model is None else str(Path(args.model))
    console.print(f"[bold]{escape(title)}[/]  graph '{escape(graph.name)}', {len(graph)} nodes")
    for key, value in sorted(graph.metadata.items()):
        console.print(f"  [dim]{escape(key)}:[/] {escape(str(value))}")
    console.print(_tensor_table(graph, "Inputs", graph.inputs))
    console.print(_tensor_table(graph, "Outputs", graph.outputs))
    symbols = graph_symbols(graph)
    if symbols:
        console.print("Symbolic dims: " + escape(", ".join(symbols)) + "  [dim](bind with --dim NAME=VALUE)[/]")
    console.print(_opset_table(graph))
    console.print(_op_table(graph, operator_registry()))
    count, nbytes = _parameters(graph)
    console.print(f"Parameters: {count:,} ({format_bytes(nbytes)})")
    return 0


def _tensor_table(graph: IrGraph, title: str, ids: list[int]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("name", "dtype", "shape"):
        table.add_column(column)
    for t in ids:
        tensor = graph.tensor(t)
        table.add_row(escape(tensor.name), tensor.dtype.name.lower(), escape(str(tensor.shape)))
    return table


def _opset_table(graph: IrGraph) -> Table:
    table = Table(title="Opsets", title_justify="left")
    table.add_column("domain")
    table.add_column("version", justify="right")
    for domain, version in sorted(graph.opset_imports.items()):
        table.add_row(escape(domain or "ai.onnx"), str(version))
    return table


def _op_table(graph: IrGraph, registry: OperatorRegistry) -> Table:
    counts = Counter((node.domain, node.op_type, node.opset) for node in nodes_within(graph))  # subgraphs' too
    table = Table(title="Operators", title_justify="left")
    table.add_column("domain")
    table.add_column("op")
    table.add_column("count", justify="right")
    table.add_column("supported")
    for (domain, op_type, opset), n in sorted(counts.items()):
        supported = registry.get(domain, op_type, opset) is not None
        table.add_row(escape(domain or "ai.onnx"), escape(op_type), str(n), "yes" if supported else "[red]no[/]")
    return table


def _parameters(graph: IrGraph) -> tuple[int, int]:
    """Element count and bytes of the weights (initializers) as stored in the model."""
    weights = [t.initializer for t in graph.tensors if t.initializer is not None]
    return sum(w.numel for w in weights), sum(w.nbytes for w in weights)
