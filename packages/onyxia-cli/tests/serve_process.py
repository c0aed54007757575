"""`onyxia serve` run as a user runs it: a child process on a free 127.0.0.1 port, waited for on /health, and
stopped with SIGINT (Ctrl-C) when the block ends, killed if it does not stop within 30 s."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

__all__ = ["STARTUP_SECONDS", "free_port", "serve_command"]

STARTUP_SECONDS = 240  # a cold shader cache compiles the model's shaders first


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def serve_command(args: list[str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`onyxia serve ARGS --port P`: yields the base URL and the process; after the block the process has exited
    on SIGINT (its return code is the caller's to check)."""
    port = free_port()
    argv = ["serve", *args, "--port", str(port)]
    code = f"from onyxia.cli.main import main; raise SystemExit(main({argv!r}))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"onyxia serve did not answer within {STARTUP_SECONDS} s"
            time.sleep(0.5)
        yield base, proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
