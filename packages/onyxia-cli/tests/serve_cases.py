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


def chat_ids(llm: LlmSession, messages: list[dict[str, str]]) -> list[int]:
    return llm.tokenizer.encode_chat_turn(llm.tokenizer.render_chat(messages))


def reference(app: Any, ids: list[int], max_tokens: int, stop: list[int] | None = None) -> tuple[str, list[int]]:
    """`LlmSession.generate` on the app's own session from an empty cache (the worker held meanwhile):
    the text it returns and the ids `generate_ids` samples (a stop id included) for `ids`."""
    from onyxia.cli.llm.chat import chat_stop_ids

    with app.state.onyxia.engine.paused(timeout=60) as llm:
        stops = chat_stop_ids(llm) if stop is None else stop
        llm.reset()
        text = "".join(llm.generate(ids, max_tokens, temperature=0.0, stop=stops))
        llm.reset()
        tokens = list(llm.generate_ids(ids, max_tokens, stop=stops))
    return text, tokens
