"""Attention ops: com.microsoft GroupQueryAttention (onnxruntime's contrib op), com.onyxia
ScaledDotProductAttention (plain MatMul/Softmax attention fused by `FuseAttention`) and com.onyxia
KvAppend (a Concat-grown KV cache fused by `FuseKvCache`)."""

from onyxia.operators.attention.gqa import GroupQueryAttentionOp
from onyxia.operators.attention.kv_append import KV_APPEND, KvAppendOp
from onyxia.operators.attention.sdpa import SDPA, ScaledDotProductAttentionOp

__all__ = ["ATTENTION_ONYXIA", "MICROSOFT", "GroupQueryAttentionOp", "KvAppendOp", "ScaledDotProductAttentionOp"]

MICROSOFT: dict[str, GroupQueryAttentionOp] = {"GroupQueryAttention": GroupQueryAttentionOp()}
ATTENTION_ONYXIA: dict[str, ScaledDotProductAttentionOp | KvAppendOp] = {**SDPA, **KV_APPEND}
