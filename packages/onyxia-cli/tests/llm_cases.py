"""The LLM fixtures (copied from shared/fixtures) and a cache of loaded sessions for the tests."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"

# (directory, precision, expected file, prefill logits tolerance[, MatMulNBits accuracy_level override])
FIXTURES = [
    ("gemma3-tiny", "fp32", "expected_fp32.json", 1e-4),
    ("gemma3-tiny", "fp16", "expected_fp16.json", 2e-2),
    # 4-bit files run as stored (MatMulNBits accuracy_level 4, int8 activations). Rounding A to int8 is
    # discontinuous, so float-order differences of 1e-7 upstream can move a logit by ~1e-2: onnxruntime
    # itself on this machine differs from these files by 6.3e-3 (q4, prompt 'long') and 7.7e-3 (q4f16)
    ("gemma3-tiny", "q4", "expected_q4.json", 1e-2),
    ("gemma3-tiny", "q4f16", "expected_q4f16.json", 5e-2),
    # the same files with onnxruntime's accuracy_level override 0 (float activations): no int8 rounding
    ("gemma3-tiny", "q4", "expected_q4_acc0.json", 1e-4, 0),
    ("gemma3-tiny", "q4f16", "expected_q4f16_acc0.json", 2e-2, 0),
    ("gemma3-tiny-genai/fp32", None, "expected_ort.json", 1e-4),
    ("gemma3-tiny-genai/fp32-fullkv", None, "expected_ort.json", 1e-4),
    ("gemma3-tiny-optimum", None, "expected.json", 1e-4),
]


def fixture_id(case: tuple[Any, ...]) -> str:
    return f"{case[0]}:{case[1] or 'file'}" + (f":acc{case[4]}" if len(case) > 4 else "")


def case_session(case: tuple[Any, ...]) -> Any:
    return session(case[0], case[1], case[4] if len(case) > 4 else None)


def expected(directory: str, name: str) -> dict[str, Any]:
    return json.loads((DATA / directory / name).read_text())


@cache
def session(directory: str, precision: str | None, accuracy_level: int | None = None) -> Any:
    from onyxia.cli.llm import LlmSession

    return LlmSession.from_pretrained(DATA / directory, precision, max_length=160, accuracy_level=accuracy_level)
