"""Attention layers over Concat-grown KV caches for the resident-KV tests (test_kv_append_resident.py), and the
resident compile: the layout and the present-to-past aliases set on the parsed graph as the LLM session sets them.

Two layers, both over past_key/past_value [batch, KV, past, H] graph inputs with present_key/present_value
outputs, a 2-D bool attention mask [batch, past + seq] (the session's, right-padded per row) and the output y
[batch, seq, heads * H]:
- optimum's plain ops: Concat caches (the value's projection Reshape + Transpose in front of its Concat),
  scaled q k^T over repeat-kv copies, the mask as Where(And(mask[:, None, None, :], causal), 0, finfo.min)
  added, Softmax, MatMul with v, Transpose + Reshape;
- PyTorch's dynamo export: ai.onnx Attention (opset 23, 4-D q/k/v, is_causal) with past_key/past_value and
  the bool mask And(mask[:, None, None, :], causal) (onnxruntime wants the mask's query dim).
causal is a [seq, past + seq] bool input (each row's bottom-right triangle).
With `rows_input` the model also has the session's `onyxia/kv_rows` input (int32 [batch, 2]); onnxruntime's
reference models have none.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onyxia.compiler import CompilerPipeline
from onyxia.core.resident_kv import KV_ROWS, ResidentKvLayout
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry

__all__ = ["HEAD", "PAST", "PRESENT", "compile_resident", "dynamo_layer", "plain_layer"]

HEAD = 8
PAST = ("past_key", "past_value")
PRESENT = ("present_key", "present_value")
_F32 = onnx.TensorProto.FLOAT


def _const(name: str, value: object, dtype: type = np.int64) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, dtype)))


def _repeat(tag: str, heads: int, kv: int) -> list[onnx.NodeProto]:
    """optimum's repeat_kv: Unsqueeze(x, 2), Expand to [B, KV, G, T, H], Reshape to [B, KV * G, T, H]."""
    n = helper.make_node
    return [
        _const(f"{tag}_ax", [2]),
        n("Unsqueeze", [f"present_{tag}", f"{tag}_ax"], [f"{tag}_5d"]),
        _const(f"{tag}_groups", [1, 1, heads // kv, 1, 1]),
        n("Expand", [f"{tag}_5d", f"{tag}_groups"], [f"{tag}_expanded"]),
        _const(f"{tag}_target", [0, heads, -1, HEAD]),
        n("Reshape", [f"{tag}_expanded", f"{tag}_target"], [f"{tag}_rep"]),
    ]


def plain_layer(heads: int, kv: int, rows_input: bool) -> onnx.ModelProto:
    n = helper.make_node
    scale = float(np.float32(HEAD**-0.25))
    nodes = [
        _const("v_shape", [0, 0, kv, HEAD]),
        n("Reshape", ["v_proj", "v_shape"], ["v_bsnh"]),
        n("Transpose", ["v_bsnh"], ["v_new"], perm=[0, 2, 1, 3]),
        n("Concat", ["past_key", "k"], ["present_key"], axis=2),
        n("Concat", ["past_value", "v_new"], ["present_value"], axis=2),
        *_repeat("key", heads, kv),
        *_repeat("value", heads, kv),
        n("Transpose", ["key_rep"], ["k_t"], perm=[0, 1, 3, 2]),
        _const("c", scale, np.float32),
        n("Mul", ["q", "c"], ["q_s"]),
        n("Mul", ["k_t", "c"], ["k_s"]),
        n("MatMul", ["q_s", "k_s"], ["x"]),
        *_allowed(),
        _const("open", [0.0], np.float32),
        _const("shut", [float(np.finfo(np.float32).min)], np.float32),
        n("Where", ["allowed", "open", "shut"], ["bias"]),
        n("Add", ["x", "bias"], ["masked"]),
        n("Softmax", ["masked"], ["p"], axis=-1),
        n("MatMul", ["p", "value_rep"], ["attn"]),
        *_merge_heads("attn", heads),
    ]
    inputs = [
        helper.make_tensor_value_info("q", _F32, ["batch", heads, "seq", HEAD]),
        helper.make_tensor_value_info("k", _F32, ["batch", kv, "seq", HEAD]),
        helper.make_tensor_value_info("v_proj", _F32, ["batch", "seq", kv * HEAD]),
    ]
    return _model(nodes, inputs, kv, rows_input)


def dynamo_layer(heads: int, kv: int, rows_input: bool) -> onnx.ModelProto:
    n = helper.make_node
    nodes = [
        *_allowed(),
        n(
            "Attention",
            ["q", "k", "v", "allowed", "past_key", "past_value"],
            ["attn", "present_key", "present_value"],
            is_causal=1,
        ),
        *_merge_heads("attn", heads),
    ]
    inputs = [
        helper.make_tensor_value_info("q", _F32, ["batch", heads, "seq", HEAD]),
        helper.make_tensor_value_info("k", _F32, ["batch", kv, "seq", HEAD]),
        helper.make_tensor_value_info("v", _F32, ["batch", kv, "seq", HEAD]),
    ]
    return _model(nodes, inputs, kv, rows_input, opset=23)


def _allowed() -> list[onnx.NodeProto]:
    """The [batch, 1, seq, past + seq] bool mask: the 2-D attention mask and the causal [seq, past + seq]."""
    return [
        _const("mask_axes", [1, 2]),
        helper.make_node("Unsqueeze", ["attention_mask", "mask_axes"], ["mask_4d"]),
        helper.make_node("And", ["mask_4d", "causal"], ["allowed"]),
    ]


def _merge_heads(attn: str, heads: int) -> list[onnx.NodeProto]:
    """[B, N, S, H] -> [B, S, N * H], as both exports write the attention for o_proj."""
    return [
        helper.make_node("Transpose", [attn], ["attn_t"], perm=[0, 2, 1, 3]),
        _const("merged", [0, 0, heads * HEAD]),
        helper.make_node("Reshape", ["attn_t", "merged"], ["y"]),
    ]


def _model(
    nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], kv: int, rows_input: bool, opset: int = 21
) -> onnx.ModelProto:
    inputs = [
        *inputs,
        helper.make_tensor_value_info("attention_mask", onnx.TensorProto.BOOL, ["batch", "past + seq"]),
        helper.make_tensor_value_info("causal", onnx.TensorProto.BOOL, ["seq", "past + seq"]),
        *(helper.make_tensor_value_info(name, _F32, ["batch", kv, "past", HEAD]) for name in PAST),
    ]
    if rows_input:
        inputs.append(helper.make_tensor_value_info(KV_ROWS, onnx.TensorProto.INT32, ["batch", 2]))
    outputs = [helper.make_empty_tensor_value_info(name) for name in ("y", *PRESENT)]
    graph = helper.make_graph(nodes, "resident_kv_layer", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def compile_resident(model: onnx.ModelProto, capacity: int, aliased: bool = True) -> Any:
    """`model` (with its kv_rows input) compiled with PAST in the resident layout and, as the session has
    them, PRESENT aliased to them (`aliased`)."""
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        graph = load_and_parse_model(Path(tmp, "model.onnx"))
    ids = {}
    for name in (*PAST, *PRESENT, KV_ROWS):
        tensor = graph.tensor_by_name(name)
        assert tensor is not None, name
        ids[name] = tensor.id
    for past, present in zip(PAST, PRESENT if aliased else ()):
        graph.aliases[ids[present]] = ids[past]
    graph.resident_kv = ResidentKvLayout(capacity, ids[KV_ROWS], frozenset(ids[name] for name in PAST))
    return CompilerPipeline(core_operator_registry()).compile(graph)
