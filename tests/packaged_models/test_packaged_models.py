"""Models that Python packages ship inside their wheels, run in Onyxia against onnxruntime.

Each model file is read from the installed package (requirements.txt pins the versions; the nox
session `packaged_models` installs them) and fed a realistic sample through the package's own
pre-processing; onnxruntime's CPU provider on the same inputs is the oracle, outputs' dtypes included
(swift_f0's float64 pitch comes back as float64).
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import assert_matches, ort_run, run_onyxia
from packaged_table import PASSING


def test_table_names_are_unique_and_span_three_domains() -> None:
    names = [m.name for m in PASSING]
    assert len(names) == len(set(names)), "a model is listed twice"
    assert {m.domain for m in PASSING} == {"vision", "audio", "text"}


@pytest.mark.parametrize("model", PASSING, ids=lambda m: m.name)
def test_packaged_model_matches_onnxruntime(runtime: Any, model: Any) -> None:
    path = model.path()
    inputs = model.inputs(path)
    expected = ort_run(path, inputs)
    measured = run_onyxia(runtime, path, inputs, runs=1)
    assert_matches(model.name, measured.outputs, expected, model.tol)
