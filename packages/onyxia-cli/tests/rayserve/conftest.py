"""Environment for the Ray Serve test, set before `ray` is imported (it reads these at import time).

Compiled plans go to a folder of this test run, never to the user's ~/.cache/onyxia (as the cli tests'
conftest does); Ray's processes inherit it, so the replicas reuse the plans the in-process app compiled.
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes Ray take 127.0.0.1 as the node's address, so every process of
the local cluster listens on loopback only (on Linux it otherwise binds the machine's address); usage
stats stay off.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

if "ONYXIA_CACHE_DIR" not in os.environ:
    os.environ["ONYXIA_CACHE_DIR"] = tempfile.mkdtemp(prefix="onyxia-test-cache-")
    atexit.register(shutil.rmtree, os.environ["ONYXIA_CACHE_DIR"], True)
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
