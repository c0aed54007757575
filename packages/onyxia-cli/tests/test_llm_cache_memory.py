"""The KV caches' size is checked against the device before anything is allocated: slots x capacity x bytes per
position in one buffer per cache tensor, refused with the numbers (and what would fit) when a buffer cannot be
bound; a session's cache buffers are exactly that (present shares past's buffer: no second copy). The 10% bound
on weights + caches is a figure of a real model's bench (README), where activations are small beside them."""

from __future__ import annotations

import pytest
from llm_cases import DATA

from onyxia.cli.llm.cache_memory import bytes_per_position, check_cache_memory
from onyxia.cli.llm.signature import read_signature
from onyxia.core import ModelLoadError
from onyxia.core.bindings import binding_limit
from onyxia.onnx import load_and_parse_model

MODEL = DATA / "gemma3-tiny" / "onnx" / "model.onnx"


def test_bytes_per_position_follow_the_graph() -> None:
    signature = read_signature(load_and_parse_model(MODEL), str(MODEL))
    # gemma3-tiny: 2 layers x (key, value), 1 kv head x head size 16, float32
    assert bytes_per_position(signature, {}) == {pair.past: 1 * 16 * 4 for pair in signature.kv}
    assert check_cache_memory(signature, {}, 8, 512, "gemma3-tiny") == 8 * 512 * 4 * 64


def test_an_impossible_combination_is_refused_with_the_numbers() -> None:
    signature = read_signature(load_and_parse_model(MODEL), str(MODEL))
    with binding_limit(128 * 1024), pytest.raises(ModelLoadError) as refused:
        check_cache_memory(signature, {}, 8, 512, "gemma3-tiny")  # 8 x 512 x 64 bytes = 256 KiB per buffer
    message = str(refused.value)
    assert "8 slots x 512 tokens" in message and "0.2 MiB" in message and "64 bytes per position" in message
    assert "lower --parallel to 4 or less or --max-length to 256 or less" in message


def test_the_cache_buffers_are_slots_times_capacity_and_nothing_else() -> None:
    from onyxia.cli.llm import LlmSession

    llm = LlmSession.from_pretrained(DATA / "qwen2-tiny-genai" / "fp32", max_length=512, slots=4)
    executor = llm.executor
    caches = sum(executor.buffer_bytes(pair.past) for pair in llm.signature.kv)
    per_position = bytes_per_position(llm.signature, executor.compiled.dims)
    assert caches == 4 * 512 * sum(per_position.values())  # slots x capacity x bytes per position, no more
    owner = executor._pool.owner
    assert all(owner(executor._ref(p.present)) == owner(executor._ref(p.past)) for p in llm.signature.kv)
