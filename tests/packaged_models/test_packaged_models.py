"""Models that Python packages ship inside their wheels, run in Onyxia against onnxruntime.

Each model file is read from the installed package (requirements.txt pins the versions; the nox
session `packaged_models` installs them) and fed a realistic sample through the package's own
pre-processing; onnxruntime's CPU provider on the same inputs is the oracle. A PENDING model must
still fail with the error its entry names: when it starts to run, this test says to move it.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import assert_matches, compile_and_load, ort_run, run_onyxia
from packaged_table import PASSING, PENDING

from onyxia.core import OnyxiaError


def test_tables_are_disjoint_and_span_three_domains() -> None:
    names = [m.name for m in PASSING] + list(PENDING)
    assert len(names) == len(set(names)), "a model is listed twice"
    assert {m.domain for m in PASSING} == {"vision", "audio", "text"}


@pytest.mark.parametrize("model", PASSING, ids=lambda m: m.name)
def test_packaged_model_matches_onnxruntime(runtime: Any, model: Any) -> None:
    path = model.path()
    inputs = model.inputs(path)
    expected = ort_run(path, inputs)
    measured = run_onyxia(runtime, path, inputs, runs=1)
    assert_matches(model.name, measured.outputs, expected, model.tol)


@pytest.mark.parametrize("name", list(PENDING))
def test_pending_model_still_fails_clearly(runtime: Any, name: str) -> None:
    model, reason = PENDING[name].model, PENDING[name].error
    path = model.path()
    inputs = model.inputs(path)
    ort_run(path, inputs)  # the inputs are valid: onnxruntime runs them
    try:
        executor, _, _ = compile_and_load(runtime, path, inputs)
        executor.run(inputs)
    except OnyxiaError as error:
        assert reason in str(error), f"{name} fails differently now: {error}"
    else:
        pytest.fail(f"{name} runs in Onyxia now: move it from PENDING to PASSING (packaged_table.py)")
