"""Attention ops: com.microsoft GroupQueryAttention (onnxruntime's contrib op) and com.onyxia
ScaledDotProductAttention (plain MatMul/Softmax attention fused by `FuseAttention`)."""

from onyxia.operators.attention.gqa import GroupQueryAttentionOp
from onyxia.operators.attention.sdpa import SDPA, ScaledDotProductAttentionOp

__all__ = ["ATTENTION_ONYXIA", "MICROSOFT", "GroupQueryAttentionOp", "ScaledDotProductAttentionOp"]

MICROSOFT: dict[str, GroupQueryAttentionOp] = {"GroupQueryAttention": GroupQueryAttentionOp()}
ATTENTION_ONYXIA: dict[str, ScaledDotProductAttentionOp] = SDPA
