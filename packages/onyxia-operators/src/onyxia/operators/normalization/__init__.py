"""Normalisation family and its neighbours: LayerNormalization, RMSNormalization and
SimplifiedLayerNormalization (RMSNorm), BatchNormalization (inference), and the com.microsoft
SkipLayerNormalization, SkipSimplifiedLayerNormalization and RotaryEmbedding, and com.onyxia NormAddNorm (a
SkipSimplifiedLayerNormalization whose skip is RMS-normalised first), RmsNormRotary (a per-head RMSNorm
fused into RotaryEmbedding, for one tensor or a q/k pair), ai.onnx RotaryEmbedding (opset 23, lowered to the
contrib op: `normalization.onnx_rotary`) and ApplyRotaryPosEmb (optimum's plain-op rotate-half RoPE,
optionally behind a per-head RMSNorm).

Part of onyxia.operators (IR -> plan). Imports onyxia.core and the shared operator helpers only
(no onnx, wgpu or onyxia.runtime). The rotation math lives in the shared WGSL module
``onyxia::rotary`` so a fused attention kernel can import it.
"""

from onyxia.core import FamilyKey, Operator, merge_families
from onyxia.operators.normalization.apply_rotary import APPLY_ROTARY, ApplyRotaryPosEmbOp
from onyxia.operators.normalization.batch_norm import BATCH_NORM, BatchNormalizationOp
from onyxia.operators.normalization.layer_norm import LAYER_NORMS, LAYER_NORMS_MS, LAYER_NORMS_ONYXIA, NormalizationOp
from onyxia.operators.normalization.onnx_rotary import ONNX_ROTARY
from onyxia.operators.normalization.rms_norm_rotary import RMS_NORM_ROTARY, RmsNormRotaryOp
from onyxia.operators.normalization.rotary import ROTARY, RotaryEmbeddingOp

__all__ = [
    "APPLY_ROTARY",
    "BATCH_NORM",
    "LAYER_NORMS",
    "LAYER_NORMS_MS",
    "NORMALIZATION",
    "NORMALIZATION_MS",
    "NORMALIZATION_ONYXIA",
    "ROTARY",
    "ApplyRotaryPosEmbOp",
    "BatchNormalizationOp",
    "NormalizationOp",
    "RmsNormRotaryOp",
    "RotaryEmbeddingOp",
]

NORMALIZATION: dict[FamilyKey, Operator] = merge_families(LAYER_NORMS, BATCH_NORM, ONNX_ROTARY)  # default domain
NORMALIZATION_MS: dict[FamilyKey, Operator] = merge_families(LAYER_NORMS_MS, ROTARY)  # com.microsoft
NORMALIZATION_ONYXIA: dict[str, Operator] = {**LAYER_NORMS_ONYXIA, **RMS_NORM_ROTARY, **APPLY_ROTARY}  # com.onyxia
