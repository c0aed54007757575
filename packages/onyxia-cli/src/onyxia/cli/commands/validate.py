"""`onyxia validate MODEL`: compile without a GPU and report what stops the model from running.

Every unsupported op type is listed at once (with node counts and names), and so is every node
using an attribute value, input form or dtype that is not implemented (the compiler's
`UnsupportedFeatures`). Shape errors stop at the first one: every later shape depends on it. Exit
status 1 on any failure.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from onyxia.cli.common import (
    add_dim_argument,
    add_model_argument,
    deferred_note,
    demotion_note,
    load_graph,
    model_path,
    operator_registry,
    parse_dims,
    variant_note,
)
from onyxia.core import IrGraph, OperatorRegistry, UnsupportedOpError

__all__ = ["add_parser", "run", "unsupported_ops"]

NAME = "validate"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        NAME, help="compile the model (no GPU needed); list unsupported ops and shape errors"
    )
    add_model_argument(parser)
    add_dim_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from onyxia.compiler import CompilerPipeline

    dims = parse_dims(args.dim)
    with model_path(args.model) as path:
        graph = load_graph(path)
    registry = operator_registry()
    missing = unsupported_ops(graph, registry)
    if missing:
        table = Table(title="Unsupported operators", title_justify="left")
        for column in ("domain", "op", "opset", "nodes", "examples"):
            table.add_column(column)
        for (domain, op_type, opset), names in sorted(missing.items()):
            examples = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
            table.add_row(escape(domain or "ai.onnx"), escape(op_type), str(opset), str(len(names)), escape(examples))
        console.print(table)
        total = sum(len(v) for v in missing.values())
        raise UnsupportedOpError(f"{len(missing)} unsupported op type(s) in {total} node(s)")
    start = time.perf_counter()
    model = CompilerPipeline(registry).compile(graph, dims)
    elapsed = (time.perf_counter() - start) * 1e3
    console.print(
        f"[green]ok[/]: {len(graph)} nodes -> {len(model.operations)} GPU ops, {model.dispatch_count} dispatches, "
        f"{len(model.shaders)} shaders (compiled in {elapsed:.0f} ms)"
        + deferred_note(model)
        + variant_note(model)
        + demotion_note(model)
    )
    if model.symbols:
        console.print("symbolic dims left for run time: " + escape(", ".join(sorted(model.symbols))))
    if model.required_features:
        console.print("requires adapter features: " + ", ".join(sorted(model.required_features)))
    return 0


def unsupported_ops(graph: IrGraph, registry: OperatorRegistry) -> dict[tuple[str, str, int], list[str]]:
    """(domain, op_type, opset) -> names of the nodes the registry has no operator for."""
    missing: dict[tuple[str, str, int], list[str]] = defaultdict(list)
    for node in graph.nodes:
        if registry.get(node.domain, node.op_type, node.opset) is None:
            missing[(node.domain, node.op_type, node.opset)].append(node.name)
    return dict(missing)
