"""One GPU runtime per session; this folder on sys.path (nox runs pytest with --import-mode=importlib).

The suite needs the packages that `nox -s packaged_models` installs (requirements*.txt), so it is
collected only when pytest is pointed at this folder or a file in it, not when the e2e session
collects all of tests/ into a venv without them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # tests/real_model_suite.py: the timing and op-count helpers


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    asked = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    return None if any(path == HERE or HERE in path.parents for path in asked) else True


@pytest.fixture(scope="session")
def runtime() -> Any:
    from onyxia.runtime import Runtime

    return Runtime()
