"""The verdict: node outputs compared in the file's topological order, the first one out of tolerance
reported with both sides' statistics and the inputs that fed it; or "all N outputs match".

The first mismatch in topological order is the one to look at: everything after it read its error.
Names Onyxia has no value for (fused away, folded into a later constant, removed) are listed with
the reason, and an input of the reported node that is one of them says where its work went.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from onyxia.cli.compare.capture import Capture
from onyxia.cli.compare.reference import ModelNode, ReferenceRun
from onyxia.cli.compare.tensors import Stats, TensorDiff, Tolerance, compare_tensors, describe

__all__ = ["Verdict", "judge", "render"]

_SHOWN_SKIPS = 20


@dataclass
class Verdict:
    compared: list[tuple[ModelNode, str, TensorDiff]] = field(default_factory=list)
    not_compared: list[tuple[ModelNode, str, str]] = field(default_factory=list)

    @property
    def mismatches(self) -> list[tuple[ModelNode, str, TensorDiff]]:
        return [c for c in self.compared if not c[2].ok]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def judge(ref: ReferenceRun, cap: Capture, tolerance: Tolerance) -> Verdict:
    verdict = Verdict()
    for node in ref.nodes:
        if node.is_constant:
            continue
        for name in node.outputs:
            if not name or name not in ref.values:
                continue
            if name in cap.values:
                verdict.compared.append((node, name, compare_tensors(ref.values[name], cap.values[name], tolerance)))
            else:
                verdict.not_compared.append((node, name, cap.skipped.get(name, "Onyxia has no tensor of this name")))
    return verdict


def render(console: Console, verdict: Verdict, ref: ReferenceRun, cap: Capture, tolerance: Tolerance) -> None:
    folded = sum(name in cap.folded for _, name, _ in verdict.compared)
    console.print(
        f"compared {len(verdict.compared)} node outputs ({folded} folded at compile time), "
        f"{len(verdict.not_compared)} not compared; tolerance atol {tolerance.atol:g} (times max(1, max|ort|)), "
        f"rtol {tolerance.rtol:g}"
    )
    if verdict.not_compared:
        console.print(_skipped_table(verdict.not_compared))
    mismatches = verdict.mismatches
    if not mismatches:
        console.print(f"[bold green]all {len(verdict.compared)} outputs match[/]")
        return
    node, name, diff = mismatches[0]
    console.print(
        f"[bold red]first mismatch[/]: node {escape(node.label)}, output '{escape(name)}': "
        f"{diff.mismatched} of {diff.total} elements {'differ' if diff.exact else 'outside tolerance'}"
        + (f" ({escape(diff.note)})" if diff.note else "")
    )
    console.print(_stats_table(diff))
    if diff.worst_index is not None and diff.worst_values is not None:
        console.print(
            f"max abs error {diff.max_abs:.4g}, max rel error {diff.max_rel:.4g}; largest mismatch at "
            f"{list(diff.worst_index)}: onnxruntime {diff.worst_values[0]:.6g}, Onyxia {diff.worst_values[1]:.6g}"
        )
    console.print(_inputs_table(node, verdict, ref, cap))
    if len(mismatches) > 1:
        last_node, last_name, _ = mismatches[-1]
        console.print(
            f"{len(mismatches) - 1} later node output(s) differ too, downstream of this one "
            f"(the last: '{escape(last_name)}' of {escape(last_node.label)})"
        )


def _skipped_table(rows: list[tuple[ModelNode, str, str]]) -> Table:
    table = Table(title="Not compared", title_justify="left")
    for column in ("output", "node", "why"):
        table.add_column(column, overflow="fold")
    for node, name, why in rows[:_SHOWN_SKIPS]:
        table.add_row(escape(name), escape(node.label), escape(why))
    if len(rows) > _SHOWN_SKIPS:
        table.add_row("...", f"{len(rows) - _SHOWN_SKIPS} more", "")
    return table


def _stats_table(diff: TensorDiff) -> Table:
    table = Table(title="Output statistics (finite elements)", title_justify="left")
    for column in ("engine", "dtype", "shape", "min", "max", "mean", "std", "NaN", "inf"):
        table.add_column(column)
    for engine, stats in (("onnxruntime", diff.reference), ("Onyxia", diff.actual)):
        table.add_row(engine, stats.dtype, str(list(stats.shape)), *_numbers(stats), str(stats.nans), str(stats.infs))
    return table


def _numbers(stats: Stats) -> list[str]:
    return ["-" if v is None else f"{v:.6g}" for v in (stats.minimum, stats.maximum, stats.mean, stats.std)]


def _inputs_table(node: ModelNode, verdict: Verdict, ref: ReferenceRun, cap: Capture) -> Table:
    """Each input of the reported node: where it comes from, what it holds, whether Onyxia's agreed."""
    diffs = {name: diff for _, name, diff in verdict.compared}
    skipped = {name: why for _, name, why in verdict.not_compared}
    table = Table(title=f"Inputs of {node.label} (values as onnxruntime has them)", title_justify="left")
    for column in ("input", "from", "dtype", "shape", "min", "max", "mean", "Onyxia"):
        table.add_column(column, overflow="fold")
    for name in node.inputs:
        if not name:
            table.add_row("(empty)", "optional input left out", "", "", "", "", "", "")
            continue
        if name in ref.feeds:
            source, status = "graph input", "same array fed to both"
        elif name in ref.initializers:
            source, status = "initializer", "same data (from the file)"
        elif name in ref.producers and ref.producers[name].is_constant:
            source, status = f"node {ref.producers[name].label}", "same data (from the file)"
        else:
            producer = ref.producers.get(name)
            source = f"node {producer.label}" if producer else "?"
            diff = diffs.get(name)
            status = (
                ("matches" if diff.ok else f"differs ({diff.mismatched} elements)")
                if diff is not None
                else f"not compared: {skipped.get(name, 'no value')}"
            )
        table.add_row(escape(name), escape(source), *_summary(ref.value(name)), escape(status))
    return table


def _summary(value: np.ndarray | None) -> list[str]:
    """onnxruntime's view of an input: dtype, shape, min, max, mean."""
    if value is None:
        return ["", "", "", "", ""]
    stats = describe(value)
    low, high, mean, _ = _numbers(stats)
    return [stats.dtype, str(list(stats.shape)), low, high, mean]
