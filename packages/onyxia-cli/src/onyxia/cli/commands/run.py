"""`onyxia run [MODEL]`: compile, run once on the WebGPU adapter, print (and save) the outputs.

Symbolic dims are bound from the input arrays' shapes (and ``--dim``) before compiling, so the
plan is fully static. Without MODEL the built-in demo runs on its shipped default inputs; any
other model must get every input through ``--input NAME=FILE.npy``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from onyxia.cli.arguments import writable_file
from onyxia.cli.common import (
    BUILTIN_MODEL_NAME,
    add_dim_argument,
    add_model_argument,
    builtin_inputs,
    load_graph,
    model_path,
    parse_dims,
)
from onyxia.cli.files import atomic_output, load_npy
from onyxia.core import Absent, InputError, IrGraph, SymbolicExpr

__all__ = ["add_parser", "bind_dims", "read_inputs", "run"]

NAME = "run"
_SHOWN_VALUES = 6


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(NAME, help="run the model once on the GPU and print its outputs")
    add_model_argument(parser)
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="value of a model input (repeatable; required for every input unless MODEL is omitted)",
    )
    add_dim_argument(parser)
    parser.add_argument(
        "--output", type=writable_file, default=None, metavar="OUT.npz", help="also save all outputs here"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from onyxia.cli.plan_cache import compile_cached
    from onyxia.runtime import Runtime

    arrays = read_inputs(args.input)
    with model_path(args.model) as path:
        graph = load_graph(path)
        source = path if args.model is not None else path.read_bytes()  # the demo may be a temporary file
    if args.model is None:
        arrays = {**builtin_inputs(), **arrays}
    dims = bind_dims(graph, arrays, parse_dims(args.dim))
    runtime = Runtime()
    start = time.perf_counter()
    # for the opened device's limits and kernel variants; a plan cached by an earlier run is not compiled again
    model = compile_cached(source, dims, runtime, graph=graph)
    compiled = time.perf_counter()
    executor = runtime.load_model(model)
    loaded = time.perf_counter()
    outputs = executor.run(arrays)
    done = time.perf_counter()
    title = BUILTIN_MODEL_NAME if args.model is None else str(args.model)
    console.print(f"[bold]{escape(title)}[/] on {escape(_adapter_name(runtime.adapter_info))}")
    console.print(
        f"[dim]compile {1e3 * (compiled - start):.0f} ms, load {1e3 * (loaded - compiled):.0f} ms, "
        f"run {1e3 * (done - loaded):.0f} ms, {model.dispatch_count} dispatches[/]"
    )
    console.print(_output_table(outputs))
    if args.output is not None:
        target = _npz_name(args.output)
        arrays_out: dict[str, Any] = {name: np.asarray(value) for name, value in outputs.items()}
        with atomic_output(target) as temporary, temporary.open("wb") as f:
            np.savez(f, **arrays_out)  # Any: numpy's stubs read **kwargs as allow_pickle
        console.print(f"saved {len(outputs)} output(s) to {escape(str(target))}")
    return 0


def read_inputs(items: Sequence[str]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise InputError(f"--input '{item}': expected NAME=FILE.npy")
        if name in arrays:
            raise InputError(f"--input {name} is given twice")
        arrays[name] = load_npy(file, f"--input {name}")
    return arrays


def _npz_name(path: Path) -> Path:
    """numpy's own rule for `np.savez(name)`: the .npz suffix is added when missing."""
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def bind_dims(graph: IrGraph, arrays: Mapping[str, np.ndarray], dims: Mapping[str, int]) -> dict[str, int]:
    """Check names, dtypes and ranks of `arrays` against the graph inputs; bind symbolic dims."""
    bound = dict(dims)
    expected = {graph.tensor(t).name: graph.tensor(t) for t in graph.inputs}
    unknown = sorted(set(arrays) - set(expected))
    if unknown:
        raise InputError(f"unknown input(s) {unknown}; the model's inputs are {sorted(expected)}")
    missing = [f"{name} ({t.dtype.name.lower()}{t.shape})" for name, t in expected.items() if name not in arrays]
    if missing:
        raise InputError(f"missing input(s) {', '.join(missing)}; give each with --input NAME=FILE.npy")
    for name, tensor in expected.items():
        array = arrays[name]
        if array.dtype != tensor.dtype.numpy:
            raise InputError(
                f"input '{name}' has dtype {array.dtype}; the model expects {tensor.dtype.numpy} "
                f"(save it with .astype(np.{tensor.dtype.numpy}))"
            )
        if isinstance(tensor.shape, Absent):
            continue
        if len(tensor.shape.dims) != array.ndim:
            raise InputError(
                f"input '{name}' has shape {list(array.shape)}; the model expects rank {len(tensor.shape.dims)} {tensor.shape}"
            )
        for axis, (dim, size) in enumerate(zip(tensor.shape.dims, array.shape)):
            _bind_one(bound, name, axis, dim, int(size), tensor.shape)
    return bound


def _bind_one(bound: dict[str, int], name: str, axis: int, dim: object, size: int, shape: object) -> None:
    if isinstance(dim, int):
        if dim != size:
            raise InputError(f"input '{name}' dim {axis} is {size}; the model expects {dim} (shape {shape})")
        return
    if isinstance(dim, SymbolicExpr) and dim.op == "name":
        symbol = str(dim.args[0])
        if bound.setdefault(symbol, size) != size:
            raise InputError(
                f"input '{name}' dim {axis} ({symbol}) is {size}, but {symbol} is already bound to {bound[symbol]}"
            )


def _adapter_name(info: object) -> str:
    if isinstance(info, Mapping):
        parts = [str(info[k]) for k in ("device", "description", "backend_type") if info.get(k)]
        return " / ".join(parts) or "WebGPU adapter"
    return str(info) if info else "WebGPU adapter"


def _output_table(outputs: Mapping[str, np.ndarray]) -> Table:
    table = Table(title="Outputs", title_justify="left")
    for column in ("name", "dtype", "shape", "values"):
        table.add_column(column, overflow="fold")
    for name, value in outputs.items():
        array = np.asarray(value)
        table.add_row(escape(name), str(array.dtype), escape(str(list(array.shape))), escape(_preview(array)))
    return table


def _preview(array: np.ndarray) -> str:
    flat = array.reshape(-1)
    shown = flat[:_SHOWN_VALUES]
    if array.dtype.kind == "f":
        text = ", ".join(f"{v:.4g}" for v in shown.tolist())
    else:
        text = ", ".join(str(v) for v in shown.tolist())
    return f"[{text}{', ...' if flat.size > _SHOWN_VALUES else ''}]"
