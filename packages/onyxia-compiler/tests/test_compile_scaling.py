"""Compile time grows linearly with graph size: a 3,000-node elementwise chain (the shape that took
over two minutes when the fusion rescanned its region) compiles in seconds, and each pass's time per
node does not grow from 1k to 3k nodes beyond noise."""

from __future__ import annotations

from onyxia.compiler.scaling import format_scaling, measure
from onyxia.operators import core_operator_registry


def _compile(length: int) -> tuple[float, dict[str, float], int]:
    (row,) = measure(core_operator_registry(), [length])
    return row.seconds, row.passes, row.operations


def test_a_3000_node_chain_compiles_in_under_10_s_and_scales_linearly() -> None:
    small, small_passes, _ = _compile(1000)
    seconds, passes, operations = _compile(3000)
    assert seconds < 10, passes
    assert operations < 3000 / 5  # fused: at most 7 reads per kernel, so about 9 nodes per dispatch
    for name, spent in passes.items():
        if spent > 0.2:  # ignore passes too quick to time reliably
            assert spent < 3 * 3 * max(small_passes.get(name, 0.0), 0.02), (name, spent, small_passes.get(name))
    assert seconds < 3 * 3 * small + 1


def test_the_scaling_table_names_the_slowest_passes() -> None:
    rows = measure(core_operator_registry(), [60, 120])
    table = format_scaling(rows, top=3).splitlines()
    assert table[0].startswith("| nodes | compile (s) | dispatches |") and len(table) == 4
    assert [r.nodes for r in rows] == [60, 120] and all(r.operations < r.nodes for r in rows)
