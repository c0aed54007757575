"""Soak test of `onyxia serve` (a user's or CI's check that the server stays correct under load).

    python tools/soak.py MODEL_DIR [--requests 2000] [--clients 8] [--seed 0] [--max-rss-drift 5]
                         [--timeout 120] [--slots N] [--server-arg=--parallel --server-arg=8 ...]
    python tools/soak.py --url http://127.0.0.1:8000 [--pid PID] ...

Starts `onyxia serve MODEL_DIR` on a free port (or soaks --url), computes each distinct request's
answer alone, warms the server up on every shape the mix can produce (every prompt, every batch size
1..slots; the RSS baseline is read after it), then sends a seeded mix of whole, streamed, cancelled,
disconnected and bad requests from concurrent clients. Exits 1 on any mismatch against the answer alone, 5xx, hang, in-flight gauge
left non-zero, or RSS growth over the limit; 2 when it could not run. The code is in tools/soak/.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the tools/soak package, however this is run

from soak.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
