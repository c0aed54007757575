"""com.microsoft ops of onnxruntime's transformer optimizer (BERT/ViT/Whisper/T5 exports), lowered
by `LowerContribOps` into ops Onyxia already runs (see `operators.lowering`): Attention,
EmbedLayerNormalization, MultiHeadAttention, FusedMatMul, GemmFastGelu, BiasSplitGelu,
DecoderMaskedMultiHeadAttention.
"""

from onyxia.operators.lowering import LowerContribOps, LoweredOp
from onyxia.operators.transformer.attention import ATTENTION
from onyxia.operators.transformer.decoder_masked_attention import DECODER_MASKED_MHA
from onyxia.operators.transformer.embed_layer_norm import EMBED_LAYER_NORM
from onyxia.operators.transformer.fused_ops import FUSED_OPS
from onyxia.operators.transformer.multi_head_attention import MULTI_HEAD_ATTENTION

__all__ = ["TRANSFORMER_MS", "LowerContribOps", "LoweredOp"]

TRANSFORMER_MS: dict[str, LoweredOp] = {
    **ATTENTION,
    **EMBED_LAYER_NORM,
    **MULTI_HEAD_ATTENTION,
    **FUSED_OPS,
    **DECODER_MASKED_MHA,
}
"""Registered in the com.microsoft domain."""
