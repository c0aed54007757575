"""Attention ops of the com.microsoft domain (onnxruntime contrib ops): GroupQueryAttention."""

from onyxia.operators.attention.gqa import GroupQueryAttentionOp

__all__ = ["MICROSOFT", "GroupQueryAttentionOp"]

MICROSOFT: dict[str, GroupQueryAttentionOp] = {"GroupQueryAttention": GroupQueryAttentionOp()}
