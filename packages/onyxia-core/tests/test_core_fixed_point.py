"""FixedPoint: rounds until nothing changes, is itself a Pass, and names what never settles."""

from __future__ import annotations

import pytest

from onyxia.core import FixedPoint, IrGraph, OnyxiaError, OperatorRegistry, Pass, Stage


class _Countdown:
    """Changes the graph `changes` times, then settles; records every call in `log`."""

    def __init__(self, name: str, changes: int, log: list[str], stage: Stage = Stage.OPTIMIZATION) -> None:
        self.name, self.stage, self.changes, self.log = name, stage, changes, log

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        self.log.append(self.name)
        self.changes -= 1
        return self.changes >= 0


def test_runs_rounds_until_a_round_changes_nothing() -> None:
    log: list[str] = []
    group = FixedPoint([_Countdown("a", 2, log), _Countdown("b", 0, log)])
    assert isinstance(group, Pass)
    assert (group.name, group.stage) == ("FixedPoint-a+b", Stage.OPTIMIZATION)
    assert group.run(IrGraph(), OperatorRegistry())
    assert log == ["a", "b", "a", "b", "a", "b"]  # two changing rounds, then a quiet one


def test_a_quiet_group_reports_no_change() -> None:
    log: list[str] = []
    assert not FixedPoint([_Countdown("a", 0, log)], name="Quiet").run(IrGraph(), OperatorRegistry())
    assert log == ["a"]


def test_a_group_that_never_settles_names_its_passes() -> None:
    group = FixedPoint([_Countdown("restless", 10**6, []), _Countdown("calm", 0, [])], max_rounds=3)
    with pytest.raises(OnyxiaError, match=r"\['restless'\] still changed the graph after 3 rounds"):
        group.run(IrGraph(), OperatorRegistry())


def test_passes_of_different_stages_are_refused() -> None:
    with pytest.raises(ValueError, match="one stage; found a: OPTIMIZATION, p: PLANNING"):
        FixedPoint([_Countdown("a", 0, []), _Countdown("p", 0, [], Stage.PLANNING)])
