"""Attention ops: com.microsoft GroupQueryAttention (onnxruntime's contrib op), com.onyxia
ScaledDotProductAttention (plain MatMul/Softmax attention fused by `FuseAttention`) and com.onyxia
KvAppend (a Concat-grown KV cache fused by `FuseKvCache`); ai.onnx Attention (opset 23+), lowered onto
ScaledDotProductAttention (`attention.onnx_attention`)."""

from onyxia.operators.attention.gqa import GroupQueryAttentionOp
from onyxia.operators.attention.kv_append import KV_APPEND, KvAppendOp
from onyxia.operators.attention.onnx_attention import ONNX_ATTENTION
from onyxia.operators.attention.sdpa import SDPA, ScaledDotProductAttentionOp

__all__ = [
    "ATTENTION_ONNX",
    "ATTENTION_ONYXIA",
    "MICROSOFT",
    "GroupQueryAttentionOp",
    "KvAppendOp",
    "ScaledDotProductAttentionOp",
]

MICROSOFT: dict[str, GroupQueryAttentionOp] = {"GroupQueryAttention": GroupQueryAttentionOp()}
ATTENTION_ONYXIA: dict[str, ScaledDotProductAttentionOp | KvAppendOp] = {**SDPA, **KV_APPEND}
ATTENTION_ONNX = ONNX_ATTENTION  # default domain
