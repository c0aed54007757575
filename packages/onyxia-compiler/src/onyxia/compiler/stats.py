"""`PassRun` and `PassStats`: what each pass did during one compile, per run and per pass.

The pipeline records one `PassRun` per pass run (observers get it with the graph); `PassStats` sums
a pass's runs so ``ONYXIA_PASS_STATS=1`` and ``onyxia compile --stats`` can show where compile time
and rewrites went. Rewrites are what a pass reports in `last_rewrites` after its run (`RewritePass`
counts the rules that fired); a pass that reports nothing counts 1 per run that changed the graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onyxia.core import Stage

__all__ = ["PassRun", "PassStats", "aggregate", "format_stats"]


@dataclass(frozen=True)
class PassRun:
    """One run of one pass; `index` is its 1-based position in the compile's pass history."""

    index: int
    name: str
    stage: Stage
    changed: bool
    rewrites: int
    ms: float
    nodes_before: int
    nodes_after: int


@dataclass
class PassStats:
    """All runs of one pass (by name) in one compile. `nodes_before`/`nodes_after` are the graph's node
    count before its first run and after its last (other passes ran in between); `node_delta` is what
    its own runs added (negative: removed)."""

    name: str
    stage: Stage
    runs: int = 0
    changed_runs: int = 0
    rewrites: int = 0
    ms: float = 0.0
    nodes_before: int = 0
    nodes_after: int = 0
    node_delta: int = 0

    def add(self, run: PassRun) -> None:
        if self.runs == 0:
            self.nodes_before = run.nodes_before
        self.runs += 1
        self.changed_runs += run.changed
        self.rewrites += run.rewrites
        self.ms += run.ms
        self.nodes_after = run.nodes_after
        self.node_delta += run.nodes_after - run.nodes_before


def aggregate(runs: Iterable[PassRun]) -> list[PassStats]:
    """One row per pass name, in stage order, then in the order the passes first ran."""
    by_name: dict[str, PassStats] = {}
    first: dict[str, int] = {}
    for run in runs:
        if run.name not in by_name:
            by_name[run.name] = PassStats(run.name, run.stage)
            first[run.name] = run.index
        by_name[run.name].add(run)
    return sorted(by_name.values(), key=lambda s: (s.stage, first[s.name]))


def format_stats(stats: list[PassStats]) -> str:
    """A plain-text table (logs and files have no rich markup): one row per pass, then the totals, whose
    node column is the graph's node count before the first pass and after the last."""
    header = ("pass", "stage", "runs", "changed", "rewrites", "ms", "nodes +/-")
    rows = [
        (s.name, s.stage.name, str(s.runs), str(s.changed_runs), str(s.rewrites), f"{s.ms:.1f}", _delta(s.node_delta))
        for s in stats
    ]
    if stats:
        total = (
            "total",
            "",
            str(sum(s.runs for s in stats)),
            str(sum(s.changed_runs for s in stats)),
            str(sum(s.rewrites for s in stats)),
            f"{sum(s.ms for s in stats):.1f}",
            f"{stats[0].nodes_before} -> {stats[0].nodes_before + sum(s.node_delta for s in stats)}",
        )
        rows.append(total)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    left = {0, 1}  # names left-aligned, numbers right-aligned

    def line(row: tuple[str, ...]) -> str:
        cells = [cell.ljust(w) if i in left else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    lines = [line(header), *(line(row) for row in rows)]
    if stats:
        lines.insert(-1, "-" * len(lines[0]))
    return "\n".join(lines)


def _delta(n: int) -> str:
    return f"{n:+d}" if n else "0"
