"""The decode bound: bytes one decode step reads (from the ONNX graph) and the copy-kernel bandwidth."""

from __future__ import annotations

import numpy as np
import pytest

from onyxia.cli.bench import DecoderConfig, SynthesizedModel, synthesize
from onyxia.cli.bench.bound import Bandwidth, StepBytes, _copy_plan, copy_bandwidth, decode_step_bytes
from onyxia.cli.bench.report import bound_figures
from onyxia.runtime import Runtime

CONFIG = DecoderConfig.tiny()
F32 = 4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedModel:
    return synthesize(CONFIG, tmp_path_factory.mktemp("bound") / "gemma3-tiny")


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    return Runtime()


def _projections(c: DecoderConfig) -> list[tuple[int, int]]:
    """(K, N) of each layer's seven projections."""
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    h, i = c.hidden_size, c.intermediate_size
    return [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)]


def _expected_weights(c: DecoderConfig, q4: bool) -> int:
    """Embedding whole (the tied LM head reads it all), projections, norms, one row of each RoPE cache."""
    per_layer = sum(n * (k // 32) * (16 + F32) if q4 else k * n * F32 for k, n in _projections(c))
    norms = (4 * c.hidden_size + 2 * c.head_dim) * F32
    rope_rows = 4 * (c.head_dim // 2) * F32
    return (
        c.vocab_size * c.hidden_size * F32 + c.num_hidden_layers * (per_layer + norms) + c.hidden_size * F32 + rope_rows
    )


def _expected_kv(c: DecoderConfig, position: int) -> int:
    per_position = 2 * c.num_key_value_heads * c.head_dim * F32  # key and value
    attended = [
        min(position + 1, c.sliding_window) if c.is_sliding(i) else position + 1 for i in range(c.num_hidden_layers)
    ]
    return per_position * sum(attended)


@pytest.mark.parametrize("precision", ["fp32", "q4"])
@pytest.mark.parametrize("position", [0, 5, 40])
def test_decode_step_bytes_match_the_config(tiny: SynthesizedModel, precision: str, position: int) -> None:
    step = decode_step_bytes(tiny.models[precision], position)
    constants = step.weight_bytes - _expected_weights(CONFIG, precision == "q4")
    assert 0 <= constants < 512  # the graph's shape and scalar constants (int64 vectors, a few floats)
    assert step.kv_bytes == _expected_kv(CONFIG, position)
    assert step.total == step.weight_bytes + step.kv_bytes and step.position == position


def test_sliding_window_caps_kv_bytes(tiny: SynthesizedModel) -> None:
    window = CONFIG.sliding_window
    far, farther = (decode_step_bytes(tiny.models["fp32"], p).kv_bytes for p in (100, 200))
    full_layers = sum(not CONFIG.is_sliding(i) for i in range(CONFIG.num_hidden_layers))
    per_position = 2 * CONFIG.num_key_value_heads * CONFIG.head_dim * F32
    assert farther - far == 100 * full_layers * per_position  # only full-attention layers grow
    assert window < 100


def test_bound_figures_and_percentage() -> None:
    step = StepBytes(weight_bytes=900, kv_bytes=100, position=3)
    bandwidth = Bandwidth(bytes_per_second=1e6, buffer_bytes=16, copies=1, seconds=1.0)
    figures = bound_figures(step, bandwidth, {"status": "ok", "decode_tok_s": 250.0})
    assert figures["bound_ms_per_token"] == pytest.approx(1.0)
    assert figures["onyxia_decode_ms_per_token"] == pytest.approx(4.0)
    assert figures["onyxia_percent_of_bound"] == pytest.approx(400.0)
    assert "onyxia_percent_of_bound" not in bound_figures(step, bandwidth, {"status": "unavailable"})


def test_copy_kernel_copies(runtime: Runtime) -> None:
    count = 4 * 1000
    executor = runtime.load_model(_copy_plan(count, copies=2))
    out = executor.run({})["bench/dst"]
    np.testing.assert_array_equal(out, np.ones(count, np.float32))
    executor.release()


def test_copy_bandwidth_is_measured(runtime: Runtime) -> None:
    measured = copy_bandwidth(runtime, buffer_bytes=1 << 20, copies=2, repeats=1)
    assert measured.buffer_bytes == 1 << 20 and measured.copies == 2
    assert measured.gbps > 0.05 and measured.bytes_per_second == pytest.approx(2 * 2 * (1 << 20) / measured.seconds)
