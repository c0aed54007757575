"""optimum's plain-op RMSNorms compile to the fused norms: no Pow/ReduceMean/Sqrt left, and every
residual step (two per layer, each Add feeding the next norm) is a SkipSimplifiedLayerNormalization, as
onnxruntime-genai exports it, or a NormAddNorm where a norm of the block's output feeds it (Gemma's sandwich norms). The numbers are the fixtures' own config (num_hidden_layers)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from llm_cases import DATA, FAMILIES

from onyxia.compiler import CompilerPipeline
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry

OPTIMUM = [f"{family}-tiny-optimum" for family in (*FAMILIES, "gemma3")]


@pytest.mark.parametrize("directory", OPTIMUM)
def test_rms_norms_and_residual_steps_are_fused(directory: str) -> None:
    graph = load_and_parse_model(DATA / directory / "model.onnx")
    compiled = CompilerPipeline(core_operator_registry()).compile(graph, {"batch_size": 1})
    ops = Counter(op.op_type for op in compiled.operations)
    assert not {"Pow", "ReduceMean", "Sqrt"} & set(ops), dict(ops)
    layers = int(json.loads((DATA / directory / "config.json").read_text())["num_hidden_layers"])
    assert ops["SkipSimplifiedLayerNormalization"] + ops["NormAddNorm"] == 2 * layers, dict(ops)
