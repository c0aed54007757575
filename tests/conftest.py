"""Shared pieces of the end-to-end tests: one GPU runtime per session and the onnxruntime oracle."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest


@pytest.fixture(scope="session")
def runtime() -> Any:
    from onyxia.runtime import Runtime

    return Runtime()


def _ort_run(path: Path, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(inputs))))


@pytest.fixture
def ort_run() -> Any:
    return _ort_run


# End-to-end tests also use the operators' oracle helper (one helper per pattern) and the model
# builders in models.py beside this file; nox runs pytest with --import-mode=importlib, which puts
# neither folder on sys.path.
import sys  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages" / "onyxia-operators" / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
