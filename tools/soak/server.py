"""The server under test: started as `onyxia serve` on a free port (or one already running), and
what the soak test reads from it: readiness, its /metrics gauges, its resident memory.

A started server's stdout and stderr go to a log file that is printed on failure. `stop()` always
ends it: SIGINT (uvicorn's graceful shutdown), then SIGKILL after the timeout; needing the kill is
itself reported, since a server that cannot shut down while idle is a hang.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

__all__ = ["Server", "gauges", "rss_kib", "start", "stop"]


@dataclass
class Server:
    url: str  # the root (no /v1)
    pid: int | None  # for RSS; None when the soak did not start it and was not told
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    stop_note: str = field(default="")

    def log_tail(self, lines: int = 40) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def start(model: str, server_args: list[str], timeout: float, log: Path | None) -> Server:
    """Start `onyxia serve MODEL` (this interpreter's onyxia) and wait until /health answers 200."""
    port = _free_port()
    log = log or Path(tempfile.mkstemp(prefix="onyxia-soak-server-", suffix=".log")[1])
    argv = [sys.executable, "-m", "onyxia.cli", "serve", model, "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen([*argv, *server_args], stdout=out, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", process.pid, process, log)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"onyxia serve exited with {process.returncode} before answering:\n{server.log_tail()}")
        if time.monotonic() > deadline:
            stop(server, 10)
            raise RuntimeError(f"onyxia serve did not answer /health within {timeout:.0f} s:\n{server.log_tail()}")
        try:
            if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.25)


def stop(server: Server, timeout: float) -> None:
    """End a server this soak started (a no-op for --url): SIGINT, then SIGKILL after `timeout` s."""
    process = server.process
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout)
        server.stop_note = f"stopped (exit {process.returncode})"
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        server.stop_note = f"HUNG: still running {timeout:.0f} s after SIGINT; killed"


def rss_kib(pid: int | None) -> int | None:
    """VmRSS of `pid` in KiB (Linux /proc), or None where it cannot be read."""
    if pid is None:
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmRSS:\s+(\d+)\s+kB", status, re.MULTILINE)
    return int(found.group(1)) if found else None


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def gauges(url: str) -> tuple[dict[str, float], dict[str, float]]:
    """(every gauge sample by name with labels, onyxia_requests_total by status) from /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    kinds = dict(re.findall(r"^# TYPE (\S+) (\S+)", text, re.MULTILINE))
    found: dict[str, float] = {}
    statuses: dict[str, float] = {}
    for line in text.splitlines():
        sample = _SAMPLE.match(line)
        if sample is None:
            continue
        name, labels, value = sample.group(1), sample.group(2) or "", float(sample.group(3))
        if kinds.get(name) == "gauge":
            found[name + labels] = value
        status = re.search(r'status="(\d+)"', labels)
        if name == "onyxia_requests_total" and status:
            statuses[status.group(1)] = statuses.get(status.group(1), 0) + value
    return found, statuses
