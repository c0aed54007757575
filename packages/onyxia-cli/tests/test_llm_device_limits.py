"""A session compiles under the opened device's storage-binding and buffer limits (what splits a weight into
ranges or pieces), unless a setting gives them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from llm_cases import DATA

from onyxia.cli.llm import LlmSession
from onyxia.compiler import CompilerPipeline
from onyxia.core import BINDING_ALIGNMENT, max_binding_bytes, max_buffer_bytes
from onyxia.core.settings import override
from onyxia.runtime import Runtime

BINDING, BUFFER = (96 << 20) + 100, (1 << 30) + 7  # a device's odd limits: planning floors them to the alignment


def _limits_seen_by_compile(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    seen: list[tuple[int, int]] = []
    compile_graph = CompilerPipeline.compile

    def recording(self: CompilerPipeline, *args: Any, **kwargs: Any) -> Any:
        seen.append((max_binding_bytes(), max_buffer_bytes()))
        return compile_graph(self, *args, **kwargs)

    monkeypatch.setattr(CompilerPipeline, "compile", recording)
    return seen


def _runtime() -> Runtime:
    runtime = Runtime()
    limits = {**runtime.ctx.limits, "max-storage-buffer-binding-size": BINDING, "max-buffer-size": BUFFER}
    runtime.ctx = dataclasses.replace(runtime.ctx, limits=limits)
    return runtime


def _floored(n: int) -> int:
    return n // BINDING_ALIGNMENT * BINDING_ALIGNMENT


def test_compile_uses_the_device_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _limits_seen_by_compile(monkeypatch)
    llm = LlmSession.from_pretrained(DATA / "gemma3-tiny-optimum", max_length=32, runtime=_runtime())
    assert seen == [(_floored(BINDING), _floored(BUFFER))]
    assert (max_binding_bytes(), max_buffer_bytes()) != seen[0]  # only the compile sees them
    steps = llm.generate_ids([2, 100, 200], 2)
    assert len(list(steps)) == 2


def test_a_setting_wins_over_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _limits_seen_by_compile(monkeypatch)
    with override(max_binding_bytes=1 << 20):
        LlmSession.from_pretrained(DATA / "gemma3-tiny-optimum", max_length=32, runtime=_runtime())
    assert seen == [(1 << 20, _floored(BUFFER))]
