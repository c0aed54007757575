"""Make the plan-building helpers (`runtime_plans.py` beside this file) importable, and share runtimes.

Opening a device on lavapipe costs about a tenth of a second, so each delivery path of immediates
gets one session-wide `Runtime`.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from onyxia.runtime import Runtime


@pytest.fixture(scope="session")
def runtime() -> Runtime:
    return Runtime()


@pytest.fixture(scope="session")
def uniform_runtime() -> Runtime:
    return Runtime(use_immediates=False)


@pytest.fixture(scope="session", params=["immediates", "uniform"])
def any_runtime(request: pytest.FixtureRequest, runtime: Runtime, uniform_runtime: Runtime) -> Runtime:
    """Both delivery paths of immediates; tests using it run once per path."""
    return runtime if request.param == "immediates" else uniform_runtime
