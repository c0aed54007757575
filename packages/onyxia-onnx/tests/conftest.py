"""Make the shared test-model helpers beside this file importable (nox runs pytest in importlib mode)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
