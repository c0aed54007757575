"""What every subcommand shares: the built-in demo model, --dim / --input parsing, loading.

User input is checked here, at the boundary: a malformed ``--dim`` is refused by the parser
(`onyxia.cli.arguments.dim_binding`), a repeated one with another value is an `InputError`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.markup import escape

from onyxia.cli.arguments import DimAction, dim_binding
from onyxia.cli.data.make_demo_model import DEMO_INPUTS, DEMO_MODEL
from onyxia.core import InputError, IrGraph, ModelLoadError, OperatorRegistry, Symbolic, SymbolicExpr

if TYPE_CHECKING:
    from onyxia.core import CompiledModel, SymbolicDim

__all__ = [
    "BUILTIN_MODEL_NAME",
    "add_dim_argument",
    "add_model_argument",
    "builtin_inputs",
    "deferred_note",
    "demotion_note",
    "dim_names",
    "format_bytes",
    "graph_symbols",
    "load_graph",
    "model_path",
    "operator_registry",
    "parse_dims",
]

BUILTIN_MODEL_NAME = "built-in demo (tiny_attention.onnx)"


def deferred_note(model: CompiledModel) -> str:
    """A second summary line saying why a plan has no steps yet: its kernels wait for graph-input values
    that set their structure (a Reduce axis ...), which `run()` gives; "0 dispatches" alone would mislead."""
    reason = model.metadata.get("deferred")
    return f"\n[yellow]deferred[/]: {escape(reason)}" if reason else ""


def variant_note(model: CompiledModel) -> str:
    """A summary line naming the kernel variants the plan chose for its adapter (a shader label ends
    ``@<variant>``: `onyxia.operators.matmul.variants`), with how many shaders use each."""
    chosen = Counter(s.label.rsplit("@", 1)[1] for s in model.shaders if "@" in s.label)
    listed = ", ".join(f"{name} ({count} shaders)" for name, count in sorted(chosen.items()))
    return f"\nkernel variants: {escape(listed)}" if listed else ""


def demotion_note(model: CompiledModel) -> str:
    """A summary line when the plan computes tensors less precisely than declared (float64 as f32), so a
    user comparing against onnxruntime knows the results are approximate (`CompiledModel.demoted`)."""
    summary = model.demotion_summary()
    return f"\n[yellow]demoted[/]: {escape(summary)}" if summary else ""


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", nargs="?", type=Path, default=None, help="ONNX model file (default: the built-in demo model)"
    )


def add_dim_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dim",
        action=DimAction,
        default=[],
        metavar="NAME=VALUE",
        help="bind a symbolic dim, e.g. --dim sequence_length=8 (repeatable)",
    )


@contextlib.contextmanager
def model_path(model: Path | None) -> Iterator[Path]:
    """`model`, or the built-in demo as a real file (it may live inside a zip)."""
    if model is not None:
        yield model
        return
    with importlib.resources.as_file(importlib.resources.files("onyxia.cli.data") / DEMO_MODEL) as path:
        yield path


def builtin_inputs() -> dict[str, np.ndarray]:
    """The demo model's default inputs, shipped beside it."""
    resource = importlib.resources.files("onyxia.cli.data") / DEMO_INPUTS
    with resource.open("rb") as f, np.load(f) as archive:
        return {name: archive[name] for name in archive.files}


def load_graph(path: Path) -> IrGraph:
    from onyxia.onnx import load_and_parse_model

    if not path.is_file():
        raise ModelLoadError(f"model file '{path}' does not exist or is not a file")
    return load_and_parse_model(path)


def operator_registry() -> OperatorRegistry:
    """The core operators plus every installed ``onyxia.operators`` plugin."""
    from onyxia.operators import core_operator_registry

    return core_operator_registry()


def parse_dims(items: Sequence[tuple[str, int] | str]) -> dict[str, int]:
    """``--dim`` bindings (pairs from the parser, or ``NAME=VALUE`` strings) as one mapping."""
    dims: dict[str, int] = {}
    for item in items:
        if isinstance(item, str):
            try:
                item = dim_binding(item)
            except argparse.ArgumentTypeError as e:
                raise InputError(f"--dim {e}") from None
        name, value = item
        if name in dims and dims[name] != value:
            raise InputError(f"--dim {name} is given twice with different values ({dims[name]} and {value})")
        dims[name] = value
    return dims


def dim_names(dims: Sequence[SymbolicDim]) -> list[str]:
    names: set[str] = set()
    for d in dims:
        if isinstance(d, SymbolicExpr):
            names |= d.names()
    return sorted(names)


def graph_symbols(graph: IrGraph) -> list[str]:
    """Names of the symbolic dims of the graph's inputs (what ``--dim`` can bind)."""
    names: set[str] = set()
    for t in graph.inputs:
        shape = graph.tensor(t).shape
        if isinstance(shape, Symbolic):
            names |= set(dim_names(shape.dims))
    return sorted(names)


def format_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
