"""Environment for the Ray Serve test, set before `ray` is imported (it reads these at import time).

Compiled plans go to a folder of this test run, never to the user's ~/.cache/onyxia (as the cli tests'
conftest does); Ray's processes inherit it, so the replicas reuse the plans the in-process app compiled.
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes Ray take 127.0.0.1 as the node's address, so every process of
the local cluster listens on loopback only (on Linux it otherwise binds the machine's address); usage
stats stay off. Ray's sessions (sockets, logs) go to a folder of this run outside the virtualenv: nox
points TMPDIR into the session's venv, where Ray's workers refuse to start ("temp_dir must not be child
directory of virtualenv root") and the driver waits for them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

if "ONYXIA_CACHE_DIR" not in os.environ:
    os.environ["ONYXIA_CACHE_DIR"] = tempfile.mkdtemp(prefix="onyxia-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ONYXIA_CACHE_DIR"], True)
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

_tmp = Path(tempfile.gettempdir()).resolve()
_outside_venv = _tmp if not _tmp.is_relative_to(Path(sys.prefix).resolve()) else Path("/tmp")  # Ray's own fallback
os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="onyxia-ray-", dir=_outside_venv)
atexit.register(shutil.rmtree, os.environ["RAY_TMPDIR"], True)
