"""Fixtures for the example package's tests: one GPU runtime and the operator registry."""

from __future__ import annotations

from typing import Any

import pytest

from onyxia.core import OperatorRegistry


@pytest.fixture(scope="session")
def runtime() -> Any:
    from onyxia.runtime import Runtime

    return Runtime()


@pytest.fixture
def registry() -> OperatorRegistry:
    from onyxia.operators import core_operator_registry

    return core_operator_registry()
