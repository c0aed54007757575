"""Make the shared oracle helper (`oracle.py` beside this file) importable by the tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
