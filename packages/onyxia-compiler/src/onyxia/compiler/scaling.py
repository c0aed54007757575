"""How compile time grows with graph size: elementwise chains of N nodes, timed per pass.

An elementwise chain is the shape where a fusion that rescans its region goes quadratic (the
3,000-node chain once took minutes), so it is the benchmark for "every pass is near-linear".
`measure` compiles chains of the given lengths with any registry (the caller's: this package never
imports the operators); ``python -m onyxia.cli.bench.compile_scaling`` prints the table the
docs show (docs/reference/passes.md), and the compiler's tests assert the growth stays linear.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from onyxia.compiler.pipeline import CompilerPipeline
from onyxia.core import DataType, GraphBuilder, IrGraph, OperatorRegistry

__all__ = ["ScalingRow", "elementwise_chain", "format_scaling", "measure"]

_OPS = ("Add", "Mul", "Relu", "Sub", "Tanh", "Neg")


def elementwise_chain(length: int) -> IrGraph:
    """x -> Add(c0) -> Mul(c1) -> Relu -> Sub(c3) -> Tanh -> Neg -> ...: the binary ops read a constant."""
    b = GraphBuilder("chain")
    t = b.input("x", DataType.FLOAT, ["n", 64])
    for i in range(length):
        op = _OPS[i % len(_OPS)]
        if op in ("Add", "Mul", "Sub"):
            t = b.op(op, t, b.initializer(f"c{i}", np.full(64, 0.5, np.float32)))
        else:
            t = b.op(op, t)
    b.output(t)
    return b.graph


@dataclass
class ScalingRow:
    nodes: int
    seconds: float
    operations: int
    passes: dict[str, float] = field(default_factory=dict)  # seconds per pass, summed over its runs


def measure(registry: OperatorRegistry, lengths: Sequence[int] = (1000, 3000, 10000)) -> list[ScalingRow]:
    rows = []
    for length in lengths:
        graph = elementwise_chain(length)
        pipeline = CompilerPipeline(registry)
        start = time.perf_counter()
        model = pipeline.compile(graph, {})
        row = ScalingRow(length, time.perf_counter() - start, len(model.operations))
        for run in pipeline.runs:
            row.passes[run.name] = row.passes.get(run.name, 0.0) + run.ms / 1e3
        rows.append(row)
    return rows


def format_scaling(rows: Sequence[ScalingRow], top: int = 6) -> str:
    """A markdown table: total and the slowest passes (seconds) per chain length."""
    slowest = sorted({name for r in rows for name in r.passes}, key=lambda n: -max(r.passes.get(n, 0.0) for r in rows))
    names = slowest[:top]
    head = ["nodes", "compile (s)", "dispatches", *names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r.nodes), f"{r.seconds:.2f}", str(r.operations), *(f"{r.passes.get(n, 0.0):.2f}" for n in names)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
