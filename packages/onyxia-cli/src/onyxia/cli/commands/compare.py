"""`onyxia compare MODEL`: run onnxruntime and Onyxia on the same inputs and name the first node whose
output differs (as NVIDIA's Polygraphy does for TensorRT).

Both engines see every intermediate tensor. onnxruntime runs the file with graph optimizations off
and every node output made a graph output, so each name of the file exists. Onyxia compiles the
file exactly as ``onyxia run`` does (same passes, same fusions; only liveness buffer sharing is off,
which is decided after every fusion) and then reads back, from the executor's buffers, every tensor
of the plan that still carries a name of the file; nothing is recompiled to expose them.

How the two graphs' nodes are matched: by tensor name. A rewrite hands the tensor it replaces its
id and name, so a plan tensor named like a tensor of the file holds that tensor's value, whatever
node now computes it. Names that fusions removed (a MatMul's product folded into its bias Add, the
inner values of an elementwise chain) have no Onyxia value: they are listed as "not compared" with
the node they were fused into, found by following the file's graph forward to the first tensor that
survives and naming the node of Onyxia's graph that produces it. Tensors folded at compile time are
compared from their folded value. Node outputs are visited in the file's topological order and the
first one out of tolerance is reported with both sides' statistics and the inputs that fed it.

Exit status: 0 when every compared output matches, 1 on a mismatch, 2 for bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from onyxia.cli.common import add_dim_argument, load_graph, operator_registry, parse_dims
from onyxia.cli.compare.feeds import DEFAULT_DIM, make_feeds
from onyxia.cli.compare.tensors import Tolerance
from onyxia.core import InputError, ModelLoadError

__all__ = ["add_parser", "run"]

NAME = "compare"
# tests/real_model_suite.py measured at most 4.5e-7 of an output's largest magnitude between
# lavapipe and onnxruntime over the packaged models; 1e-5 leaves the same 20x margin it does.
DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-5

_EPILOG = """\
How nodes are matched: by tensor name. Onyxia's rewrites keep the name of the tensor a fused node
produces, so every name that survives compilation is compared; names fusions removed are listed as
"not compared (fused into <node>)", the node being the one of Onyxia's graph that computes the first
surviving tensor downstream. Capturing changes no fusion: the model is compiled as `onyxia run` does
and the surviving tensors are read back from the executor's buffers. A float tensor matches when
|onyxia - ort| <= rtol * |ort| + atol * max(1, max|ort|) everywhere (NaN matches NaN, inf the same
inf; half-precision tensors never below their type's epsilon); integer and bool tensors must be equal.
Exit status: 0 all outputs match, 1 a mismatch, 2 bad input."""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        NAME,
        help="run onnxruntime and Onyxia on the same inputs; name the first node whose output differs",
        description="Run onnxruntime (CPU, optimizations off) and Onyxia on the same inputs, compare every "
        "intermediate tensor both have, and report the first node in topological order whose output "
        "leaves tolerance.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", type=Path, help="ONNX model file")
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="value of a model input (repeatable); inputs not given are random, shaped from the model",
    )
    add_dim_argument(parser)
    parser.add_argument(
        "--atol",
        type=_tolerance,
        default=DEFAULT_ATOL,
        help=f"absolute tolerance, times max(1, the tensor's largest |value|) (default {DEFAULT_ATOL:g}: 20x the "
        "largest error measured over the packaged models)",
    )
    parser.add_argument(
        "--rtol", type=_tolerance, default=DEFAULT_RTOL, help=f"relative tolerance (default {DEFAULT_RTOL:g})"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    from onyxia.cli.commands.run import read_inputs
    from onyxia.cli.compare.capture import capture
    from onyxia.cli.compare.reference import run_reference
    from onyxia.cli.compare.report import judge, render

    given = read_inputs(args.input)
    try:
        graph = load_graph(args.model)
    except ModelLoadError as e:  # exit 1 means "differs" to a script; an unreadable file is bad input
        raise InputError(str(e)) from e
    feeds = make_feeds(graph, given, parse_dims(args.dim), args.seed)
    described = ", ".join(
        f"{name} {value.dtype}{list(value.shape)}{' (random)' if name in feeds.generated else ''}"
        for name, value in feeds.arrays.items()
    )
    console.print(f"[bold]{escape(str(args.model))}[/]")
    console.print(f"inputs: {escape(described)}" + (f" [dim](seed {args.seed})[/]" if feeds.generated else ""))
    if feeds.defaulted:  # before either engine runs: a default that breaks the model explains the error
        console.print(
            f"[yellow]dims given no value, set to {DEFAULT_DIM}[/]: {escape(', '.join(feeds.defaulted))} "
            "(choose with --dim NAME=VALUE)"
        )
    reference = run_reference(args.model, feeds.arrays)
    captured = capture(graph, operator_registry(), feeds.dims, feeds.arrays, reference)
    tolerance = Tolerance(atol=args.atol, rtol=args.rtol)
    console.print(f"onnxruntime (CPU, no graph optimizations) against Onyxia on {escape(captured.adapter)}")
    verdict = judge(reference, captured, tolerance)
    render(console, verdict, reference, captured, tolerance)
    return 0 if verdict.ok else 1


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0")
    return value
