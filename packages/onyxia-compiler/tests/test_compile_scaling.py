"""Compile work grows linearly with graph size: a 1,500-node elementwise chain (the shape that took
minutes when the fusion rescanned its region) costs about 3x the Python calls of a 500-node one, not 9x.

Counted in function calls (`onyxia.core.call_count`), not seconds: the count is the same on a loaded machine,
so the test checks the growth without timing anything (the seconds are the benchmark's:
``python -m onyxia.cli.bench.compile_scaling``)."""

from __future__ import annotations

from onyxia.compiler.pipeline import CompilerPipeline
from onyxia.compiler.scaling import elementwise_chain, format_scaling, measure
from onyxia.core.call_count import count_calls
from onyxia.operators import core_operator_registry


def _calls_and_operations(length: int) -> tuple[int, int]:
    """Python and C function calls made while compiling an elementwise chain of `length` nodes."""
    graph, pipeline = elementwise_chain(length), CompilerPipeline(core_operator_registry())
    model, calls = count_calls(lambda: pipeline.compile(graph, {}))
    return calls, len(model.operations)


def test_compile_work_grows_linearly_with_the_chain() -> None:
    _calls_and_operations(60)  # one-time work (registry tables, shader sources) out of the comparison
    small, _ = _calls_and_operations(500)
    large, operations = _calls_and_operations(1500)
    assert operations < 1500 / 5  # fused: at most 7 reads per kernel, so about 9 nodes per dispatch
    assert large < 3.6 * small, (small, large)  # linear: ~3x (a quadratic pass would make it ~9x)


def test_the_scaling_table_names_the_slowest_passes() -> None:
    rows = measure(core_operator_registry(), [60, 120])
    table = format_scaling(rows, top=3).splitlines()
    assert table[0].startswith("| nodes | compile (s) | dispatches |") and len(table) == 4
    assert [r.nodes for r in rows] == [60, 120] and all(r.operations < r.nodes for r in rows)
