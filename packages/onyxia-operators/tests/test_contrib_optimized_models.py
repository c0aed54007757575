"""End to end: onnxruntime's transformer optimizer (`optimize_model`) rewrites a BERT export and a
ViT-shaped encoder into com.microsoft Attention / EmbedLayerNormalization / SkipLayerNormalization /
BiasGelu, and onnxruntime's own graph optimizer (session level EXTENDED) writes FusedMatMul into the
ViT export; Onyxia runs each optimized model and matches onnxruntime on it.

The BERT and ViT are optimum's exports under tests/data/real_models (weights and feeds committed
there); the ViT-shaped encoder is written in plain ops by `transformer_models.vit_encoder`.
(`optimize_model` runs with opt_level=0: its onnxruntime pre-pass imports torch, absent here.)
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from oracle import check_model
from transformer_models import vit_encoder

REAL_MODELS = Path(__file__).resolve().parents[3] / "tests" / "data" / "real_models"


def _optimize(path: Path, model_type: str, heads: int, hidden: int, out: Path) -> onnx.ModelProto:
    """The optimized model as the optimizer saves it (saving adds the com.microsoft opset import)."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(str(path), model_type=model_type, num_heads=heads, hidden_size=hidden, opt_level=0)
    optimized.save_model_to_file(str(out / "optimized.onnx"))
    return onnx.load(out / "optimized.onnx")


def _contrib_ops(model: onnx.ModelProto) -> Counter[str]:
    return Counter(n.op_type for n in model.graph.node if n.domain == "com.microsoft")


def test_bert_export_after_optimize_model(tmp_path: Path) -> None:
    model = _optimize(REAL_MODELS / "bert.onnx", "bert", heads=4, hidden=64, out=tmp_path)
    ops = _contrib_ops(model)
    assert ops["Attention"] == 2 and ops["EmbedLayerNormalization"] == 1, ops
    assert ops["SkipLayerNormalization"] == 4 and ops["BiasGelu"] == 2, ops
    recorded = np.load(REAL_MODELS / "bert.npz")
    feeds = {k.removeprefix("input."): v for k, v in recorded.items() if k.startswith("input.")}
    check_model(model, feeds)


def test_bert_export_other_batch_and_padding(tmp_path: Path) -> None:
    """Batch 3, 9 tokens, rows padded to 9, 4 and 1 key: the mask_index EmbedLayerNormalization counts."""
    model = _optimize(REAL_MODELS / "bert.onnx", "bert", heads=4, hidden=64, out=tmp_path)
    rng = np.random.default_rng(5)
    mask = (np.arange(9)[None, :] < np.array([9, 4, 1])[:, None]).astype(np.int64)
    feeds = {
        "input_ids": rng.integers(0, 1000, (3, 9)).astype(np.int64),
        "attention_mask": mask,
        "token_type_ids": rng.integers(0, 2, (3, 9)).astype(np.int64),
    }
    check_model(model, feeds)


def test_vit_shaped_encoder_after_optimize_model(tmp_path: Path) -> None:
    path = tmp_path / "vit.onnx"
    onnx.save(vit_encoder(hidden=32, heads=4, layers=2), path)
    model = _optimize(path, "vit", heads=4, hidden=32, out=tmp_path)
    ops = _contrib_ops(model)
    assert ops["Attention"] == 2 and ops["SkipLayerNormalization"] == 4 and ops["BiasGelu"] == 2, ops
    pixels = np.random.default_rng(9).standard_normal((2, 3, 16, 16)).astype(np.float32)
    check_model(model, {"pixel_values": pixels})


def test_vit_export_after_onnxruntime_graph_optimizer(tmp_path: Path) -> None:
    """onnxruntime's EXTENDED level folds the export's q and k scalings into FusedMatMul's alpha."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "vit_optimized.onnx")
    ort.InferenceSession(str(REAL_MODELS / "vit.onnx"), options, providers=["CPUExecutionProvider"])
    model = onnx.load(options.optimized_model_filepath)
    ops = _contrib_ops(model)
    assert ops["FusedMatMul"] == 2, ops
    recorded = np.load(REAL_MODELS / "vit.npz")
    feeds = {k.removeprefix("input."): v for k, v in recorded.items() if k.startswith("input.")}
    check_model(model, feeds, dims={"num_channels": 3})
