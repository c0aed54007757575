"""`onyxia serve` behind Ray Serve (onyxia.cli.serve.ray_deployment), run by `nox -s rayserve` only.

A local Ray (two CPUs, loopback only: conftest.py) runs two replicas of `create_app()` on the gemma3
fixture behind Ray Serve's proxy on 127.0.0.1; the real `openai` client talks to it. Greedy answers
must equal those of a plain `create_app()` in this process, and concurrent requests must be answered
by both replicas: each answer names its replica (`x-onyxia-replica`, the id Ray Serve gave it), and
those ids must be the live replicas' actor names. A watchdog stops Ray and the process if anything hangs.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import socket
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

import openai
import pytest
import ray
from openai.types.chat import ChatCompletionMessageParam
from ray import serve
from starlette.testclient import TestClient

from onyxia.cli.serve import create_app
from onyxia.cli.serve.ray_deployment import REPLICA_HEADER, deployment

MODEL_DIR = Path(__file__).resolve().parents[1] / "data" / "gemma3-tiny"
APP_OPTIONS: dict[str, Any] = {"precision": "fp32", "max_length": 160}
QUESTIONS = ("Tell me a fortune", "What is the moon made of?")
MAX_TOKENS = 16
WATCHDOG_S = 600  # Ray's start, three model loads and the requests take about a minute on 2 lavapipe cores


def _ask(client: openai.OpenAI, question: str) -> Any:
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": question}]
    return client.chat.completions.with_raw_response.create(
        model="gemma3-tiny", messages=messages, temperature=0, max_tokens=MAX_TOKENS
    )


def _free_port() -> int:
    """A port free on 127.0.0.1 now (Ray Serve's proxy binds it itself, a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    """Each question's answer (message, finish reason, usage) from a plain create_app() in this process."""
    with TestClient(create_app(MODEL_DIR, **APP_OPTIONS)) as http:
        client = openai.OpenAI(base_url=f"{http.base_url}/v1", api_key="unused", http_client=http, max_retries=0)
        answers = {q: _ask(client, q).parse() for q in QUESTIONS}
    return {q: (a.choices[0].message.content, a.choices[0].finish_reason, a.usage) for q, a in answers.items()}


@pytest.fixture(scope="module")
def client(expected: dict[str, Any], request: pytest.FixtureRequest) -> Iterator[openai.OpenAI]:
    """The `openai` client on a local Ray Serve running `deployment(MODEL_DIR, 2)`; all of it is shut
    down afterwards, or by the watchdogs if the module is still running after WATCHDOG_S."""
    stderr = _terminal(request)
    watchdog = threading.Timer(WATCHDOG_S, _give_up, [stderr])
    watchdog.daemon = True
    watchdog.start()
    # the backstop needs no GIL: ray's C++ code can hold it while it waits (for a worker that never comes)
    faulthandler.dump_traceback_later(WATCHDOG_S + 30, exit=True, file=stderr)
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        assert ray.util.get_node_ip_address() == "127.0.0.1"
        port = _free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        # one request at a time per replica (as its one worker runs them): concurrent requests must spread
        serve.run(deployment(MODEL_DIR, 2, **APP_OPTIONS, max_ongoing_requests=1), name="onyxia", route_prefix="/")
        yield openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
    finally:
        serve.shutdown()
        ray.shutdown()
        watchdog.cancel()
        faulthandler.cancel_dump_traceback_later()
        stderr.close()


def _terminal(request: pytest.FixtureRequest) -> TextIO:
    """The process's real stderr, not pytest's capture of it (which an exit would lose)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        return os.fdopen(os.dup(2), "w")


def _give_up(stderr: TextIO) -> None:
    """Print every thread's stack, stop the local Ray node's processes (its agents too, which a plain
    exit orphans), and end this process failing."""
    print(f"test_ray_serve: still running after {WATCHDOG_S} s; stopping Ray and exiting", file=stderr, flush=True)
    faulthandler.dump_traceback(file=stderr)
    node = ray._private.worker._global_node  # the processes ray.init started on this machine
    if node is not None:
        node.kill_all_processes(check_alive=False, allow_graceful=True)
    os._exit(1)


def _replica_ids() -> set[str]:
    """The running replicas' ids, from their Ray actor names (SERVE_REPLICA::<app>#<deployment>#<id>)."""
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
    return {n.rsplit("#", 1)[1] for n in names if n.startswith("SERVE_REPLICA::onyxia#onyxia#")}


def _check(raw: Any, expected: dict[str, Any], question: str) -> str:
    answer = raw.parse()
    content, finish_reason, usage = expected[question]
    assert (answer.choices[0].message.content, answer.choices[0].finish_reason) == (content, finish_reason)
    assert answer.usage is not None  # cached prompt tokens differ: a replica keeps its last prompt's cache
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (
        usage.prompt_tokens,
        usage.completion_tokens,
    )
    return str(raw.headers[REPLICA_HEADER])


def test_answers_through_ray_serve_equal_a_plain_app(client: openai.OpenAI, expected: dict[str, Any]) -> None:
    assert all(content for content, _, _ in expected.values())
    assert [m.id for m in client.models.list().data] == ["gemma3-tiny"]
    for question in QUESTIONS * 3:
        _check(_ask(client, question), expected, question)


def test_concurrent_requests_reach_both_replicas(client: openai.OpenAI, expected: dict[str, Any]) -> None:
    questions = QUESTIONS * 3
    with ThreadPoolExecutor(len(questions)) as pool:
        raws = list(pool.map(lambda q: _ask(client, q), questions))
    answered_by = [_check(raw, expected, q) for raw, q in zip(raws, questions)]
    replicas = _replica_ids()
    assert len(replicas) == 2
    assert set(answered_by) == replicas


def test_without_ray_serve_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray.serve", None)  # as if ray[serve] were not installed
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'ray\[serve\]'"):
        deployment(MODEL_DIR)
