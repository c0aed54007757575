"""Every ONNX backend node case of every registered op: it passes, or `EXPECTED` says why not.

Each case runs baked (inputs Onyxia needs at compile time frozen into initializers) and is checked
against `EXPECTED`. The unbaked mode (every graph input fed at run time, as `onnx.backend.test` does)
is checked as one count against `UNBAKED_PASS_FLOOR` rather than as a second parametrisation: its
failures are compile-time refusals that other work removes a few at a time, so a floor that only
rises keeps the suite honest without a second list to edit for each case. Its cost is the baked
cases' second compile: a case that baked nothing has the same outcome unbaked (`run_unbaked`), so
the outcomes of the parametrised cases, when they ran first in this process, are reused.
"""

from __future__ import annotations

import pytest

from conformance.expected import EXPECTED, UNBAKED_PASS_FLOOR
from conformance.harness import (
    PASSED,
    REJECTED_DTYPE,
    Case,
    Outcome,
    needs_constant,
    run_case,
    run_unbaked,
    selected_cases,
)

_CASES = selected_cases()
_BAKED: dict[str, Outcome] = {}  # outcomes of test_node_case, by case name, for test_unbaked_pass_floor


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_node_case(case: Case) -> None:
    outcome = _BAKED[case.name] = run_case(case)
    reason = EXPECTED.get(case.name)
    if reason is not None:
        assert outcome.status != PASSED, f"{case.name} passes now: remove it from EXPECTED (listed as: {reason})"
    elif outcome.status != REJECTED_DTYPE:  # the harness has checked that the dtype was refused at compile time
        assert outcome.status == PASSED, f"{case.name} {outcome.status}: {outcome.detail}"


def test_unbaked_pass_floor() -> None:
    """Unbaked, at least `UNBAKED_PASS_FLOOR` storable cases pass, and a case that passes baked fails
    unbaked only by refusing, at compile time, an input it needs as a constant (never wrong values)."""
    passed, wrong = 0, []
    for case in (c for c in _CASES if c.storable):
        baked = _BAKED.get(case.name)
        outcome = run_unbaked(case, baked)
        passed += outcome.status == PASSED
        if outcome.status != PASSED and (baked or run_case(case)).status == PASSED and needs_constant(outcome) is None:
            wrong.append(f"{case.name}: {outcome.detail}")
    assert not wrong, f"cases that pass baked but fail unbaked other than by needing a constant: {wrong}"
    assert passed >= UNBAKED_PASS_FLOOR, f"{passed} cases pass unbaked; the recorded floor is {UNBAKED_PASS_FLOOR}"


def test_expected_lists_only_selected_cases() -> None:
    selected = {c.name for c in _CASES}
    stale = sorted(set(EXPECTED) - selected)
    assert not stale, f"EXPECTED lists cases that are not selected (renamed, or their op unregistered): {stale}"


def test_dtype_cases_are_not_listed() -> None:
    listed = sorted(c.name for c in _CASES if c.no_gpu_type and c.name in EXPECTED)
    assert not listed, f"cases rejected by dtype need no EXPECTED entry: {listed}"
