"""Batched decode steps through the dense products (continuous batching: B streams, one token each, a product with
M = B): MatMul by a compile-time weight (ragged K, so no vec4 rows of a), a q/k/v-like MatMulGroup, a GatedMatMul
and a tied lm head (MatMulTransB), in one symbolic-M plan per matmul variant. Each M from 2 to 8, and 12 (a block
of 8 rows and a partial one), matches onnxruntime, creates no pipeline, and gives every row bit for bit what the
plan computes for that row alone (M = 1): a stream in a batch must get exactly the tokens it gets alone.
``simd8_shared`` is lavapipe's variant (its rows4 and rows8 tiles load each weight once for all rows); ``simd8``
keeps matmul.wgsl for the lm head's larger M, which sums in the one-row kernel's order."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
import pytest
from fusion_models import graph_model, ops_of
from onnx import helper
from oracle import assert_close, compile_model, reference_outputs, runtime

from onyxia.core.adapter_facts import force_variants
from onyxia.operators.matmul.variants import FAMILY

RNG = np.random.default_rng(26)
SIZES = (2, 3, 4, 5, 8, 12)
F16_TOLERANCE = (1e-2, 5e-2)  # onnxruntime's f16 MatMul sums in another order


def _random(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.3).astype(dtype)


def _products() -> tuple[onnx.ModelProto, dict[str, int]]:
    """Four products, each of its own input (so GroupMatMuls groups only q/k/v), and each input's K."""
    weights = {"w": _random(37, 45), "q": _random(40, 24), "k": _random(40, 8), "v": _random(40, 8)}
    weights |= {"g": _random(40, 36), "u": _random(40, 36), "e": _random(333, 64)}
    nodes = [
        helper.make_node("MatMul", ["x_w", "w"], ["y_w"]),
        *(helper.make_node("MatMul", ["x_qkv", n], [f"y_{n}"]) for n in "qkv"),
        helper.make_node("MatMul", ["x_mlp", "g"], ["gate"]),
        helper.make_node("MatMul", ["x_mlp", "u"], ["up"]),
        helper.make_node("Gelu", ["gate"], ["act"], approximate="tanh"),
        helper.make_node("Mul", ["act", "up"], ["y_mlp"]),
        helper.make_node("Transpose", ["e"], ["et"], perm=[1, 0]),
        helper.make_node("MatMul", ["x_head", "et"], ["y_head"]),
    ]
    inputs = {"x_w": 37, "x_qkv": 40, "x_mlp": 40, "x_head": 64}
    outputs = ["y_w", "y_q", "y_k", "y_v", "y_mlp", "y_head"]
    return graph_model(nodes, {n: (np.float32, ["seq", k]) for n, k in inputs.items()}, weights, outputs), inputs


def _check_rows(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], tolerance: tuple[float, float] | None) -> None:
    """Every M of SIZES through one plan: against onnxruntime, each row equal to that row run alone, and no new
    pipeline after the first run."""
    executor = runtime().load_model(compile_model(model))
    names = [o.name for o in model.graph.output]
    alone = []
    for r in range(max(SIZES)):
        got = executor.run({n: v[r : r + 1] for n, v in feeds.items()})
        alone.append({name: got[name].copy() for name in names})
    pipelines = executor.stats.pipelines_created
    for m in SIZES:
        rows = {n: v[:m] for n, v in feeds.items()}
        got = executor.run(rows)
        for name, expected in zip(names, reference_outputs(model, rows, "ort")):
            assert_close(got[name], expected, f"{name} (M {m})", tolerance=tolerance)
            for r in range(m):
                np.testing.assert_array_equal(got[name][r], alone[r][name][0], err_msg=f"{name}: row {r} of {m}")
    assert executor.stats.pipelines_created == pipelines, "a batch size recompiled"


@pytest.mark.parametrize("variant", ["simd8_shared", "simd8"])
def test_each_row_of_a_batch_is_the_row_alone(variant: str) -> None:
    model, inputs = _products()
    feeds = {n: _random(max(SIZES), k) for n, k in inputs.items()}
    with force_variants({FAMILY: variant}):
        plan = compile_model(model)
        assert sorted(ops_of(plan)) == ["GatedMatMul", "MatMul", "MatMulGroup", "MatMulTransB"]
        labels = {s.label.partition("@")[0] for s in plan.shaders if "@" in s.label}
        # lavapipe's variant takes every M of the lm head to matmul_rows.wgsl; simd8 its larger M to matmul.wgsl
        expected = {"matmul/matmul_group", "matmul/matmul_rows"} | ({"matmul/matmul"} if variant == "simd8" else set())
        assert labels == expected
        _check_rows(model, feeds, None)


def test_f16_lm_head_rows() -> None:
    """The f16 lm head (sums in f32, stored as f16) in lavapipe's variant."""
    nodes = [helper.make_node("Transpose", ["e"], ["et"], perm=[1, 0]), helper.make_node("MatMul", ["x", "et"], ["y"])]
    model = graph_model(nodes, {"x": (np.float16, ["seq", 32])}, {"e": _random(70, 32, dtype=np.float16)}, ["y"])
    with force_variants({FAMILY: "simd8_shared"}):
        _check_rows(model, {"x": _random(max(SIZES), 32, dtype=np.float16)}, F16_TOLERANCE)
