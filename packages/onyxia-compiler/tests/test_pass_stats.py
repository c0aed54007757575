"""Pass observers, `PassRun`/`PassStats` and the settings hooks (pass_stats, dump_ir, check: ONYXIA_PASS_STATS, ...)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from onyxia.compiler import CompilerPipeline, PassError
from onyxia.compiler.stats import PassRun, PassStats, aggregate, format_stats
from onyxia.core import DataType, GraphBuilder, IrGraph, OnyxiaError, OperatorRegistry, Stage
from onyxia.core.settings import override
from onyxia.operators import core_operator_registry


@pytest.fixture(scope="module")
def registry() -> OperatorRegistry:
    return core_operator_registry()


class _Counting:
    """Changes the graph `changes` times, reporting `rewrites` per changed run when given."""

    def __init__(self, name: str, stage: Stage, changes: int, rewrites: int | None = None) -> None:
        self.name, self.stage, self.changes, self.rewrites = name, stage, changes, rewrites

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        self.changes -= 1
        if self.rewrites is not None:
            self.last_rewrites = self.rewrites if self.changes >= 0 else 0
        return self.changes >= 0


def _graph() -> IrGraph:
    """Two cancelling Transpose pairs (CancelTransposes fires twice) and a dead Neg (Cleanup removes it)."""
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, [2, 3])
    y = b.input("y", DataType.FLOAT, [2, 3])
    b.op("Neg", x, _name="dead")
    tx = b.op("Transpose", b.op("Transpose", x, perm=[1, 0]), perm=[1, 0])
    ty = b.op("Transpose", b.op("Transpose", y, perm=[1, 0]), perm=[1, 0])
    b.output(b.op("Add", tx, b.op("Mul", ty, b.initializer("w", np.full((2, 3), 2, np.float32)))))
    return b.graph


def test_observers_see_every_run_in_order_with_the_graph(registry: OperatorRegistry) -> None:
    seen: list[tuple[int, str, Stage, bool, int]] = []

    def observer(run: PassRun, graph: IrGraph) -> None:
        assert len(graph) == run.nodes_after  # the graph as the pass left it
        seen.append((run.index, run.name, run.stage, run.changed, len(graph)))

    pipeline = CompilerPipeline(registry).add_pass(_Counting("twice", Stage.OPTIMIZATION, changes=2))
    pipeline.observe(observer).compile(_graph())
    assert [s[0] for s in seen] == list(range(1, len(seen) + 1))
    assert [(i, n, st, c) for i, n, st, c, _ in seen] == [(r.index, r.name, r.stage, r.changed) for r in pipeline.runs]
    names = [s[1] for s in seen]
    resolution = ["SymbolicResolution", "MarkValueInputs", "InsertValueReadbacks"]
    inference = ["ShapeInference", "RecordValueChecks", "LowerContribOps"]
    assert names[:9] == resolution + inference * 2  # inference settles in 2 rounds
    assert names.count("twice") == 3  # changed, changed, settled
    assert names[-1] == "Planning"
    assert [s[2] for s in seen] == sorted(s[2] for s in seen), "stages run in order"
    assert seen[0][4] == 7 and seen[-1][4] == 1  # the transposes cancel, Neg dies, Add and Mul fuse into one


def test_stats_aggregate_runs_changes_rewrites_time_and_nodes(registry: OperatorRegistry) -> None:
    pipeline = CompilerPipeline(registry)
    pipeline.add_pass(_Counting("counted", Stage.OPTIMIZATION, changes=2, rewrites=3))
    pipeline.add_pass(_Counting("uncounted", Stage.OPTIMIZATION, changes=1))
    graph = _graph()
    pipeline.compile(graph)
    stats = {s.name: s for s in pipeline.stats}
    counted, uncounted = stats["counted"], stats["uncounted"]
    assert (counted.runs, counted.changed_runs, counted.rewrites) == (3, 2, 6)
    assert (uncounted.runs, uncounted.changed_runs, uncounted.rewrites) == (3, 1, 1)  # 1 per changed run
    # RewritePass reports how many rules fired: two Transpose pairs cancelled in one run
    cancel = stats["CancelTransposes"]
    assert cancel.rewrites == 2 and cancel.changed_runs == 1 and cancel.node_delta == -4
    assert stats["Cleanup"].node_delta == -1  # the dead Neg
    assert stats["SymbolicResolution"].rewrites == 0
    assert sum(s.runs for s in stats.values()) == len(pipeline.runs)
    assert all(s.ms >= 0 for s in stats.values())
    assert sum(s.ms for s in stats.values()) == pytest.approx(sum(r.ms for r in pipeline.runs))
    assert stats["SymbolicResolution"].nodes_before == len(graph) == 7
    assert len(graph) + sum(s.node_delta for s in stats.values()) == pipeline.runs[-1].nodes_after
    # rows follow stage order, then first run
    rows = pipeline.stats
    assert [s.stage for s in rows] == sorted(s.stage for s in rows)
    assert [s.name for s in rows][-2:] == ["BufferAliasing", "Planning"]


def test_stats_are_per_compile(registry: OperatorRegistry) -> None:
    pipeline = CompilerPipeline(registry)
    pipeline.compile(_graph())
    first = len(pipeline.runs)
    pipeline.compile(_graph())
    assert len(pipeline.runs) == first
    assert pipeline.runs[0].index == 1


def test_pass_stats_setting_logs_one_table(registry: OperatorRegistry, caplog: pytest.LogCaptureFixture) -> None:
    # debug 0: its per-run lines would log too
    with override(debug=0, pass_stats=False), caplog.at_level(logging.WARNING, logger="onyxia.compiler.pipeline"):
        CompilerPipeline(registry).compile(_graph())
    assert not caplog.records, "nothing is logged without ONYXIA_PASS_STATS"
    pipeline = CompilerPipeline(registry).add_pass(_Counting("counted", Stage.OPTIMIZATION, changes=1, rewrites=5))
    with override(debug=0, pass_stats=True), caplog.at_level(logging.WARNING, logger="onyxia.compiler.pipeline"):
        pipeline.compile(_graph())
    assert len(caplog.records) == 1
    lines = caplog.records[0].getMessage().splitlines()
    assert lines[0] == "pass statistics:"
    assert lines[1].split() == ["pass", "stage", "runs", "changed", "rewrites", "ms", "nodes", "+/-"]
    rows = {line.split()[0]: line.split() for line in lines[2:] if not line.startswith("-")}
    assert list(rows) == [s.name for s in pipeline.stats] + ["total"]
    assert rows["counted"][1:5] == ["OPTIMIZATION", "2", "1", "5"]
    assert rows["CancelTransposes"][4] == "2" and rows["CancelTransposes"][-1] == "-4"
    total = rows["total"]
    assert total[0:3] == ["total", str(len(pipeline.runs)), str(sum(r.changed for r in pipeline.runs))]
    assert total[-3:] == ["7", "->", "1"]


def test_failed_compile_keeps_stats_and_still_logs_them(
    registry: OperatorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        name, stage = "Broken", Stage.OPTIMIZATION

        def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
            raise RuntimeError("boom")

    pipeline = CompilerPipeline(registry).add_pass(Broken())
    with (
        override(debug=0, pass_stats=True),
        caplog.at_level(logging.WARNING, logger="onyxia.compiler.pipeline"),
        pytest.raises(PassError, match="Broken"),
    ):
        pipeline.compile(_graph())
    names = [s.name for s in pipeline.stats]
    resolution = ["SymbolicResolution", "MarkValueInputs", "InsertValueReadbacks"]
    assert names[:7] == [*resolution, "ShapeInference", "RecordValueChecks", "LowerContribOps", "ConstantFolding"]
    assert "Broken" not in names
    assert "ConstantFolding" in caplog.records[0].getMessage()


def test_format_stats_totals() -> None:
    stats = [PassStats("A", Stage.INFERENCE), PassStats("B", Stage.OPTIMIZATION)]
    for run in (
        PassRun(1, "A", Stage.INFERENCE, True, 1, 1.25, 10, 10),
        PassRun(2, "B", Stage.OPTIMIZATION, True, 4, 2.0, 10, 6),
        PassRun(3, "B", Stage.OPTIMIZATION, False, 0, 0.5, 6, 6),
    ):
        stats[run.name == "B"].add(run)
    assert aggregate([]) == []
    assert format_stats(stats).splitlines() == [
        "pass   stage         runs  changed  rewrites   ms  nodes +/-",
        "A      INFERENCE        1        1         1  1.2          0",
        "B      OPTIMIZATION     2        1         4  2.5         -4",
        "------------------------------------------------------------",
        "total                   3        2         5  3.8    10 -> 6",
    ]


def test_dump_ir_setting_writes_one_text_file_per_run(registry: OperatorRegistry, tmp_path: Path) -> None:
    pipeline = CompilerPipeline(registry)
    with override(dump_ir=tmp_path / "ir"):
        pipeline.compile(_graph())
    files = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert files == [f"{r.index:03d}-{r.name}.txt" for r in pipeline.runs]
    assert "Transpose" in (tmp_path / "ir" / files[0]).read_text()
    last = (tmp_path / "ir" / files[-1]).read_text()
    assert last.startswith("graph ") and "Transpose" not in last


def test_check_setting_names_the_pass_that_broke_the_graph(registry: OperatorRegistry) -> None:
    class Corrupting:
        name, stage = "Corrupting", Stage.FOLDING  # before fusion takes the Add away

        def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
            node = graph.nodes_of("Add")[0]
            node.inputs[0] = node.inputs[1]  # behind the graph's back: the use maps drift
            return False

    with override(check=True), pytest.raises(OnyxiaError, match="not tracked as a use") as info:
        CompilerPipeline(registry).add_pass(Corrupting()).compile(_graph())
    assert "ONYXIA_CHECK after pass Corrupting" in info.value.__notes__
