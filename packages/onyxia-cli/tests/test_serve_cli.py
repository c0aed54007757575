"""`onyxia serve`: its flags, the message without the serve extra, and a real server process."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from llm_cases import DATA
from serve_process import serve_command


def test_help_lists_the_server_flags(cli: Callable[..., Any]) -> None:
    result = cli("serve", "--help")
    assert result.code == 0
    for flag in ("--host", "--port", "--max-queue", "--api-key", "--max-length", "--precision", "--gather-ms"):
        assert flag in result.out


def test_bad_flags_stop_at_the_parser(cli: Callable[..., Any]) -> None:
    assert cli("serve", "--port", "zero").code == 2
    assert cli("serve", "--max-queue", "0").code == 2
    refused = cli("serve", "--gather-ms", "5000")
    assert refused.code == 2 and "expected 0 to 1000" in refused.err


def test_without_the_serve_extra_it_says_what_to_install(
    cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    result = cli("serve", str(DATA / "gemma3-tiny"))
    assert result.code == 2
    assert "uvicorn" in result.err and "onyxia-cli[serve]" in result.err


def test_the_command_serves_until_interrupted() -> None:
    with serve_command([str(DATA / "gemma3-tiny"), "--precision", "fp32", "--max-length", "64"]) as (url, proc):
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0}
        answer = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60).json()
        assert answer["usage"]["completion_tokens"] == 3 and answer["model"] == "gemma3-tiny"
        assert httpx.post(f"{url}/v1/chat/completions", json={**body, "max_tokens": 100}).status_code == 200
    assert proc.returncode in (0, 130)
