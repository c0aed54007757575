"""The global flags ``--debug``, ``--check`` and ``--backend`` set the settings of the same names for
the command they run, and leave the process's settings as they were."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from onyxia.core import IrGraph
from onyxia.core.settings import settings


def test_debug_and_check_flags_set_the_settings_for_the_command(
    cli: Callable[..., Any], mlp_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks: list[int] = []
    original = IrGraph.check

    def counted(graph: IrGraph) -> None:
        checks.append(len(graph))
        original(graph)

    monkeypatch.setattr(IrGraph, "check", counted)
    before = settings()
    plain = cli("compile", str(mlp_model))
    assert plain.code == 0, plain.err
    assert not checks and "pass 001" not in plain.err
    flagged = cli("--debug", "1", "--check", "compile", str(mlp_model))
    assert flagged.code == 0, flagged.err
    assert "pass 001 SymbolicResolution" in flagged.err  # ONYXIA_DEBUG>=1 logs every run as a warning
    assert len(checks) == flagged.err.count("changed="), "ONYXIA_CHECK checks after every pass run"
    assert settings() == before, "the flags end with the command"


def test_a_bad_flag_value_is_one_error_line(cli: Callable[..., Any], mlp_model: Path) -> None:
    result = cli("--debug", "-1", "compile", str(mlp_model))
    assert result.code == 1
    assert "error: setting 'debug' must be >= 0, got -1" in result.err


def test_backend_flag_reaches_the_runtime(cli: Callable[..., Any]) -> None:
    result = cli("--backend", "cuda", "run")  # the built-in model
    assert result.code == 1
    assert "ONYXIA_BACKEND='cuda' is not a backend" in result.err
