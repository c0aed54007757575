"""Models made by the real tools, op by op, against onnxruntime on the same inputs.

tests/data/op_models/ holds what `tools/op_models` wrote (seeded random weights, nothing downloaded;
see its README): onnxruntime.quantization's quantize_dynamic and quantize_static (QOperator and QDQ)
of a small conv net and a MiniLM-shaped BERT, BERT and ViT rewritten into com.microsoft contrib ops
by onnxruntime.transformers.optimizer, torch nn.LSTM / nn.GRU (uni/bidirectional, batch-first,
packed sequences -> `sequence_lens`), a torch.stft log-mel front end (both torch exporters), and
each op those introduce cut out on its own (`op_*`). Each `.npz` holds the inputs and
onnxruntime 1.32's outputs.

Integer outputs must be equal. Float outputs use the real-model suite's bound (1e-5 of the
output's largest magnitude): measured on lavapipe (2026-11-28) the largest error over the passing
files is 5.3e-7 of it (ViT, and the isolated STFT at 5.0e-7), about 20x inside. The exception is
`bert_dynamic_int8`, see `FLOAT_BOUNDS`.
Every generated file is in `PASSING`: each runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from real_model_suite import assert_matches

import onyxia.compiler
import onyxia.onnx
import onyxia.operators
from onyxia.cli.commands.run import bind_dims
from onyxia.runtime import compiling_for

DATA = Path(__file__).resolve().parent / "data" / "op_models"

# Files Onyxia runs and matches onnxruntime on.
PASSING: tuple[str, ...] = (
    "convnet",
    "bert",
    "vit",
    "lstm",
    "lstm_bidirectional_batch_first",
    "lstm_packed",
    "lstm_bidirectional_packed",
    "gru_batch_first",
    "gru_bidirectional",
    "gru_bidirectional_packed",
    "bert_dynamic_int8",
    "bert_dynamic_int8_reduce_range",
    "convnet_dynamic_uint8",
    "convnet_static_qoperator",
    "convnet_static_qdq",
    "bert_static_qdq",
    "bert_optimized",
    "bert_optimized_fastgelu",
    "vit_optimized",
    "op_SkipLayerNormalization",
    "op_BiasGelu",
    "op_EmbedLayerNormalization_i32",
    "op_Attention_i32",
    "op_FastGelu",
    "op_QuantizeLinear_s8",
    "op_QuantizeLinear_u8",
    "op_DequantizeLinear_s8",
    "op_DequantizeLinear_u8",
    "op_QLinearAdd_u8",
    "op_QLinearMul_u8",
    "op_QLinearGlobalAveragePool_u8",
    "op_QLinearMatMul_u8s8",
    "op_QLinearMatMul_u8",
    "op_QLinearConv_u8s8i32",
    "op_QGemm_u8s8i32",
    "op_DynamicQuantizeLinear",
    "op_ConvInteger_u8",
    "op_MatMulInteger_u8",
    "op_MatMulInteger_u8s8",
    "op_STFT",
    "stft_logmel",  # a [batch, length] signal (TorchScript exporter), as onnxruntime takes it
    "stft_logmel_dynamo",  # weights listed in value_info (dynamo exporter)
    "op_GRU_i32",
    "op_GRU",
    "op_LSTM_i32",
    "op_LSTM",
    "bert_static_qoperator",
    "op_QLinearSoftmax_u8",
)


# Float bounds wider than the suite's, as a fraction of the output's largest magnitude.
# bert_dynamic_int8 (quantize_dynamic's defaults): onnxruntime's U8S8 MatMulInteger on this x86
# machine (no AVX-VNNI) adds u8 x s8 product pairs in int16 and saturates, so its record is not the
# exact integer product (e.g. 1 of the 2048 of the first key projection). Onyxia sums in int32:
# measured 3.9e-4 of the output's scale apart, while the same model quantized with reduce_range
# (no saturation) agrees to 2.8e-7. 2e-3 is 5x the measured gap and a quarter of the model's own
# int8 error against its fp32 export (8.8e-3 of scale).
FLOAT_BOUNDS: dict[str, float] = {"bert_dynamic_int8": 2e-3}


def _records(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    with np.load(DATA / f"{name}.npz") as npz:
        inputs = {k.removeprefix("input."): npz[k] for k in npz.files if k.startswith("input.")}
        outputs = {k.removeprefix("output."): npz[k] for k in npz.files if k.startswith("output.")}
    return inputs, outputs


def _run(runtime: Any, name: str) -> dict[str, np.ndarray]:
    inputs, _ = _records(name)
    graph = onyxia.onnx.load_and_parse_model(DATA / f"{name}.onnx")
    with compiling_for(runtime):  # the kernels `onyxia run` picks for this device
        model = onyxia.compiler.CompilerPipeline(onyxia.operators.core_operator_registry()).compile(
            graph, bind_dims(graph, inputs, {})
        )
    outputs: dict[str, np.ndarray] = runtime.load_model(model).run(inputs)
    return outputs


def test_every_generated_file_is_in_one_table() -> None:
    manifest = json.loads((DATA / "manifest.json").read_text())
    names = [m["name"] for m in manifest["models"]]
    assert sorted(names) == sorted(PASSING), "a file of tools/op_models is not in PASSING"


@pytest.mark.parametrize("name", PASSING)
def test_op_model_matches_onnxruntime(runtime: Any, name: str, record_property: Any) -> None:
    _, expected = _records(name)
    got = _run(runtime, name)
    if name not in FLOAT_BOUNDS:
        record_property("worst_relative_error", assert_matches(name, got, expected))
        return
    assert sorted(got) == sorted(expected)
    for key, ref in expected.items():
        assert got[key].shape == ref.shape and got[key].dtype == ref.dtype == np.float32
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(got[key], ref, rtol=0, atol=FLOAT_BOUNDS[name] * scale, err_msg=f"{name}: {key}")
