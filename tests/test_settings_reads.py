"""`tests/lint/check_settings_reads.py` (run by `nox -s lint`): the sources read no ``ONYXIA_*``
variable outside `onyxia.core.settings`, and each way of reading one is caught with its line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHECK = Path(__file__).parent / "lint" / "check_settings_reads.py"

BAD = """import os
from os import environ, getenv
a = os.environ["ONYXIA_A"]
b = environ.get("ONYXIA_B", "1") == "1"
c = getenv("ONYXIA_C")
d = "ONYXIA_D" in os.environ
e = os.environ.get(f"ONYXIA_{a}")
_ENV = "ONYXIA_F"
fine = (os.environ.get("HOME"), "set ONYXIA_G=1 to ...", f"ONYXIA_H={a!r} is not a backend")
__all__ = ["ONYXIA_DOMAIN"]
"""


def _run(*folders: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), *map(str, folders)], capture_output=True, text=True)


def test_the_package_sources_read_onyxia_variables_only_in_settings() -> None:
    result = _run()
    assert result.returncode == 0, result.stdout
    assert "0 ONYXIA_* environment read(s) outside onyxia/core/settings.py in 6 folder(s)" in result.stdout


def test_every_kind_of_read_is_reported_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "reader.py").write_text(BAD)
    (tmp_path / "onyxia" / "core").mkdir(parents=True)
    (tmp_path / "onyxia" / "core" / "settings.py").write_text(BAD)  # the one module allowed to read
    result = _run(tmp_path)
    assert result.returncode == 1
    reported = [line.split(": ", 1)[0].rsplit(":", 1) for line in result.stdout.splitlines()[:-1]]
    assert reported == [[str(tmp_path / "reader.py"), str(n)] for n in (3, 4, 5, 6, 7, 8)]
    assert "reader.py:7: reads ONYXIA_... from the environment" in result.stdout
    assert "reader.py:8: holds the variable name 'ONYXIA_F' for a later read" in result.stdout
