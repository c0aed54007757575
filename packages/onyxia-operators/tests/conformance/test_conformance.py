"""Every ONNX backend node case of every registered op: it passes, or `EXPECTED` says why not."""

from __future__ import annotations

import pytest

from conformance.expected import EXPECTED
from conformance.harness import PASSED, REJECTED_DTYPE, Case, run_case, selected_cases

_CASES = selected_cases()


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_node_case(case: Case) -> None:
    outcome = run_case(case)
    reason = EXPECTED.get(case.name)
    if reason is not None:
        assert outcome.status != PASSED, f"{case.name} passes now: remove it from EXPECTED (listed as: {reason})"
    elif outcome.status != REJECTED_DTYPE:  # the harness has checked that the dtype was refused at compile time
        assert outcome.status == PASSED, f"{case.name} {outcome.status}: {outcome.detail}"


def test_expected_lists_only_selected_cases() -> None:
    selected = {c.name for c in _CASES}
    stale = sorted(set(EXPECTED) - selected)
    assert not stale, f"EXPECTED lists cases that are not selected (renamed, or their op unregistered): {stale}"


def test_dtype_cases_are_not_listed() -> None:
    listed = sorted(c.name for c in _CASES if c.no_gpu_type and c.name in EXPECTED)
    assert not listed, f"cases rejected by dtype need no EXPECTED entry: {listed}"
