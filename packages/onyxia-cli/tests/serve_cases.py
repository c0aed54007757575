"""A server for the serve tests: uvicorn on 127.0.0.1 in a thread, on a port the OS picked."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llm_cases import session

from onyxia.cli.llm import LlmSession

MODEL = "gemma3-tiny"
STARTUP_SECONDS = 30


def tiny_session() -> LlmSession:
    """The fp32 gemma3 fixture (max_length 160), shared with the LLM tests of this process."""
    llm: LlmSession = session(MODEL, "fp32")
    return llm


@contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve `app` until the block ends; yields its base URL. The socket is bound before the server
    starts (no race for the port), startup is bounded, and the server is always stopped."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the test server did not start within {STARTUP_SECONDS} s")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(STARTUP_SECONDS)
        sock.close()
