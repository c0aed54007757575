"""The fusion passes: each applies rule tables kept beside the operator families whose kernels they
produce, with the one engine of `onyxia.core.rewrite`. A pass here is a name, a stage and its tables;
adding a fusion is a `Rule` in its family's ``fusions.py`` (and, for a new pass, a line below).

| pass                   | rules (module)                                                            |
|------------------------|---------------------------------------------------------------------------|
| CancelTransposes       | bypass_lowered_identity (`attention.onnx_attention_fusions`), cancel_transposes, merge_transposes (`rearrange.fusions`), gather_columns_of_transposed_table (`gather_scatter.fusions`) |
| FoldTransposeIntoMatMul| fold_transpose_into_matmul (`matmul.fusions`)                              |
| FuseMatMulBias         | fold_add_into_MatMul (`matmul.bias_fusions`), fold_add_into_MatMulNBits, fuse_cast_mul_into_MatMulInteger (`quantized`), fuse_dynamic_quantize_into_MatMulIntegerToFloat (`quantized.integer_fusions`) |
| GroupMatMuls           | split_packed_matmul (`matmul.packed_fusions`), split_packed_matmul_nbits (`quantized.split_fusions`), group_matmuls (`matmul.fusions`), group_matmul_nbits (`quantized.fusions`), group_dynamic_quantize_matmul (`quantized.integer_fusions`) |
| FuseMlpGate            | gelu_tanh_formula (`elementwise.activation_fusions`), fuse_{gelu,silu}_mul_into_MatMulGroup / _MatMulNBitsGroup / _DynamicQuantizeMatMulGroup (matmul, quantized) |
| FuseRmsNorm            | `normalization.rms_fusions`: plain-op RMSNorm -> SimplifiedLayerNormalization |
| FuseRotateHalf         | `normalization.rotate_half_fusions`: plain-op rotate-half RoPE -> one rotary kernel; rotate_before_transpose, norm_before_transpose (`normalization.rotary_layout_fusions`), rotate_by_angles (`normalization.rotary_angle_fusions`) |
| FuseRmsNormIntoRotary  | fuse_rms_norm_into_rotary (`normalization.fusions`)                        |
| FuseRmsNormRotaryPair  | pair_rms_norm_rotary (`normalization.rotary_pair_fusions`): a layer's q and k RmsNormRotary -> one |
| FuseResidualRmsNorm    | fuse_add_into_SimplifiedLayerNormalization / _RMSNormalization (same)      |
| FuseNormAddNorm        | fuse_norm_into_skip_norm (`normalization.norm_add_norm_fusions`): Gemma's sandwich norms -> NormAddNorm |
| FuseKvCache            | fuse_kv_append, merge_kv_appends (`attention.kv_fusions`): Concat-grown KV caches -> KvAppend |
| FuseAttention          | shape_of_reshape, identity_slice, fuse_attention, fold_transpose_into_attention (`attention.fusions`), fold_query_transpose, read_grouped_k/_v, transpose_through_view (`attention.onnx_attention_fusions`) |
| FuseElementwise        | fuse_elementwise_chain (`elementwise.fusions`)                             |
"""

from __future__ import annotations

from onyxia.core.rewrite import RewritePass
from onyxia.operators.attention.fusions import ATTENTION_FUSIONS
from onyxia.operators.attention.kv_fusions import KV_CACHE_FUSIONS
from onyxia.operators.attention.onnx_attention_fusions import (
    BYPASS_LOWERED_IDENTITY,
    FOLD_QUERY_TRANSPOSE,
    READ_GROUPED_KV,
    TRANSPOSE_THROUGH_VIEW,
)
from onyxia.operators.elementwise.activation_fusions import ACTIVATION_FUSIONS
from onyxia.operators.elementwise.fusions import ELEMENTWISE_FUSIONS
from onyxia.operators.gather_scatter.fusions import GATHER_FUSIONS
from onyxia.operators.matmul.bias_fusions import FOLD_ADD_INTO_MATMUL
from onyxia.operators.matmul.fusions import FOLD_TRANSPOSE_INTO_MATMUL, FUSE_MLP_GATE, FUSE_SILU_GATE, GROUP_MATMULS
from onyxia.operators.matmul.packed_fusions import SPLIT_PACKED_MATMUL
from onyxia.operators.normalization.fusions import NORMALIZATION_FUSIONS
from onyxia.operators.normalization.norm_add_norm_fusions import NORM_ADD_NORM_FUSIONS
from onyxia.operators.normalization.rms_fusions import RMS_NORM_FUSIONS
from onyxia.operators.normalization.rotary_angle_fusions import ROTARY_ANGLE_FUSIONS
from onyxia.operators.normalization.rotary_layout_fusions import ROTARY_LAYOUT_FUSIONS
from onyxia.operators.normalization.rotary_pair_fusions import ROTARY_PAIR_FUSIONS
from onyxia.operators.normalization.rotate_half_fusions import ROTATE_HALF_FUSIONS
from onyxia.operators.quantized.fusions import (
    FOLD_ADD_INTO_MATMUL_NBITS,
    FUSE_CAST_MUL_INTO_MATMUL_INTEGER,
    FUSE_MLP_GATE_NBITS,
    FUSE_SILU_GATE_NBITS,
    GROUP_MATMUL_NBITS,
)
from onyxia.operators.quantized.integer_fusions import (
    INTEGER_GATE_FUSIONS,
    INTEGER_GROUP_FUSIONS,
    INTEGER_QUANTIZE_FUSIONS,
)
from onyxia.operators.quantized.split_fusions import SPLIT_PACKED_MATMUL_NBITS
from onyxia.operators.rearrange.fusions import TRANSPOSE_FUSIONS

__all__ = [
    "CancelTransposes",
    "ElementwiseFusionPass",
    "FoldTransposeIntoMatMul",
    "FuseAttention",
    "FuseElementwise",
    "FuseKvCache",
    "FuseMatMulBias",
    "FuseMlpGate",
    "FuseNormAddNorm",
    "FuseResidualRmsNorm",
    "FuseRmsNorm",
    "FuseRmsNormIntoRotary",
    "FuseRmsNormRotaryPair",
    "FuseRotateHalf",
    "GroupMatMuls",
]

_RESIDUAL = tuple(r for r in NORMALIZATION_FUSIONS if r.name.startswith("fuse_add_into_"))
_ROTARY = tuple(r for r in NORMALIZATION_FUSIONS if r.name == "fuse_rms_norm_into_rotary")


class CancelTransposes(RewritePass):
    """Transposes that need not run: pairs that cancel or merge, and a transposed table read by Gather."""

    name = "CancelTransposes"
    rules = (BYPASS_LOWERED_IDENTITY, *TRANSPOSE_FUSIONS, *GATHER_FUSIONS)


class FoldTransposeIntoMatMul(RewritePass):
    name = "FoldTransposeIntoMatMul"
    rules = (FOLD_TRANSPOSE_INTO_MATMUL,)


class FuseMatMulBias(RewritePass):
    """Before GroupMatMuls, so that biased projections group with each other."""

    name = "FuseMatMulBias"
    rules = (
        FOLD_ADD_INTO_MATMUL,
        FOLD_ADD_INTO_MATMUL_NBITS,
        FUSE_CAST_MUL_INTO_MATMUL_INTEGER,
        *INTEGER_QUANTIZE_FUSIONS,
    )


class GroupMatMuls(RewritePass):
    """Packed projections are split first, so that a gate/up split is a pair FuseMlpGate gates."""

    name = "GroupMatMuls"
    rules = (SPLIT_PACKED_MATMUL, SPLIT_PACKED_MATMUL_NBITS, GROUP_MATMULS, GROUP_MATMUL_NBITS, *INTEGER_GROUP_FUSIONS)


class FuseMlpGate(RewritePass):
    name = "FuseMlpGate"
    rules = (
        *ACTIVATION_FUSIONS,
        FUSE_MLP_GATE,
        FUSE_MLP_GATE_NBITS,
        FUSE_SILU_GATE,
        FUSE_SILU_GATE_NBITS,
        *INTEGER_GATE_FUSIONS,
    )


class FuseRmsNorm(RewritePass):
    """Before the rotary and residual fusions, which match SimplifiedLayerNormalization."""

    name = "FuseRmsNorm"
    rules = RMS_NORM_FUSIONS


class FuseRotateHalf(RewritePass):
    name = "FuseRotateHalf"
    rules = (*ROTATE_HALF_FUSIONS, *ROTARY_LAYOUT_FUSIONS, *ROTARY_ANGLE_FUSIONS)


class FuseKvCache(RewritePass):
    name = "FuseKvCache"
    rules = KV_CACHE_FUSIONS


class FuseRmsNormIntoRotary(RewritePass):
    name = "FuseRmsNormIntoRotary"
    rules = _ROTARY


class FuseRmsNormRotaryPair(RewritePass):
    """After FuseRmsNormIntoRotary, whose RmsNormRotary nodes it pairs."""

    name = "FuseRmsNormRotaryPair"
    rules = ROTARY_PAIR_FUSIONS


class FuseResidualRmsNorm(RewritePass):
    name = "FuseResidualRmsNorm"
    rules = _RESIDUAL


class FuseNormAddNorm(RewritePass):
    """After FuseResidualRmsNorm, whose SkipSimplifiedLayerNormalization it matches."""

    name = "FuseNormAddNorm"
    rules = NORM_ADD_NORM_FUSIONS


class FuseAttention(RewritePass):
    name = "FuseAttention"
    rules = (*ATTENTION_FUSIONS, FOLD_QUERY_TRANSPOSE, *READ_GROUPED_KV, TRANSPOSE_THROUGH_VIEW)


class FuseElementwise(RewritePass):
    name = "FuseElementwise"
    rules = ELEMENTWISE_FUSIONS


ElementwiseFusionPass = FuseElementwise  # the name
