"""The fusion passes: each applies rule tables kept beside the operator families whose kernels they
produce, with the one engine of `onyxia.core.rewrite`. A pass here is a name, a stage, its tables and a
docstring whose first sentence says what it saves; adding a fusion is a `Rule` in its family's
``fusions.py`` (and, for a new pass, a class here and its line in `default_passes()`). The table of
passes and their rules in ARCHITECTURE.md is generated from these classes (`tools/docs_tables.py`).
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
from onyxia.operators.elementwise.involutions import INVOLUTIONS
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
from onyxia.operators.quantized.quantize_in_norm_fusions import QUANTIZE_IN_NORM_FUSIONS
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
    "QuantizeInNorm",
    "SimplifyElementwise",
]

_RESIDUAL = tuple(r for r in NORMALIZATION_FUSIONS if r.name.startswith("fuse_add_into_"))
_ROTARY = tuple(r for r in NORMALIZATION_FUSIONS if r.name == "fuse_rms_norm_into_rotary")


class CancelTransposes(RewritePass):
    """Transposes that need not run: pairs that cancel or merge, and a transposed table read by Gather."""

    name = "CancelTransposes"
    rules = (BYPASS_LOWERED_IDENTITY, *TRANSPOSE_FUSIONS, *GATHER_FUSIONS)


class SimplifyElementwise(RewritePass):
    """Elementwise ops that undo each other removed (Not, BitwiseNot or Neg applied twice), before a fusion
    takes them into a kernel."""

    name = "SimplifyElementwise"
    rules = INVOLUTIONS


class FoldTransposeIntoMatMul(RewritePass):
    """A MatMul reads its transposed operand in place (MatMulTransB), so a tied lm head never copies the embedding
    table transposed."""

    name = "FoldTransposeIntoMatMul"
    rules = (FOLD_TRANSPOSE_INTO_MATMUL,)


class FuseMatMulBias(RewritePass):
    """Bias Adds (Qwen2's q/k/v) into the product's epilogue, and quantize_dynamic's Cast, scale Mul and
    DynamicQuantizeLinear into its integer product.

    Before GroupMatMuls, so that biased projections group with each other."""

    name = "FuseMatMulBias"
    rules = (
        FOLD_ADD_INTO_MATMUL,
        FOLD_ADD_INTO_MATMUL_NBITS,
        FUSE_CAST_MUL_INTO_MATMUL_INTEGER,
        *INTEGER_QUANTIZE_FUSIONS,
    )


class GroupMatMuls(RewritePass):
    """Projections of one input (q/k/v, gate/up) in one dispatch, packed qkv/gate_up products cut into column blocks
    first.

    Packed projections are split first, so that a gate/up split is a pair FuseMlpGate gates."""

    name = "GroupMatMuls"
    rules = (SPLIT_PACKED_MATMUL, SPLIT_PACKED_MATMUL_NBITS, GROUP_MATMULS, GROUP_MATMUL_NBITS, *INTEGER_GROUP_FUSIONS)


class FuseMlpGate(RewritePass):
    """The MLP's Gelu or SiLU gate and its Mul taken into the gate/up group, so the gate product is never stored
    (optimum's spelled-out tanh Gelu read as Gelu first)."""

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
    """optimum's Pow/ReduceMean/Sqrt/Div/Mul RMSNorm as one SimplifiedLayerNormalization.

    Before the rotary and residual fusions, which match SimplifiedLayerNormalization."""

    name = "FuseRmsNorm"
    rules = RMS_NORM_FUSIONS


class FuseRotateHalf(RewritePass):
    """optimum's Slice/Neg/Concat/Mul/Add rotate-half RoPE as one rotary kernel (partial for Phi-3, the q/k norm and
    the heads Transpose folded in; Cos/Sin of the angles taken in the kernel)."""

    name = "FuseRotateHalf"
    rules = (*ROTATE_HALF_FUSIONS, *ROTARY_LAYOUT_FUSIONS, *ROTARY_ANGLE_FUSIONS)


class FuseKvCache(RewritePass):
    """Concat-grown k and v caches (and the v heads Transpose) as one KvAppend, in place where the cache can grow at
    its end."""

    name = "FuseKvCache"
    rules = KV_CACHE_FUSIONS


class FuseRmsNormIntoRotary(RewritePass):
    """The q/k RMS norm and the rotary embedding after it in one dispatch."""

    name = "FuseRmsNormIntoRotary"
    rules = _ROTARY


class FuseRmsNormRotaryPair(RewritePass):
    """A layer's q and k norm+rotary as one RmsNormRotaryPair dispatch.

    After FuseRmsNormIntoRotary, whose RmsNormRotary nodes it pairs."""

    name = "FuseRmsNormRotaryPair"
    rules = ROTARY_PAIR_FUSIONS


class FuseResidualRmsNorm(RewritePass):
    """The residual Add and the RMS norm after it in one dispatch (SkipSimplifiedLayerNormalization)."""

    name = "FuseResidualRmsNorm"
    rules = _RESIDUAL


class FuseNormAddNorm(RewritePass):
    """Gemma's sandwich norms (post-norm, residual Add, the next pre-norm) as one NormAddNorm row kernel.

    After FuseResidualRmsNorm, whose SkipSimplifiedLayerNormalization it matches."""

    name = "FuseNormAddNorm"
    rules = NORM_ADD_NORM_FUSIONS


class QuantizeInNorm(RewritePass):
    """A norm feeding a 4-bit product with int8 activations writes A quantized, so the product quantizes nothing.

    After FuseNormAddNorm and FuseMlpGate, whose NormAddNorm and gated groups it matches."""

    name = "QuantizeInNorm"
    rules = QUANTIZE_IN_NORM_FUSIONS


class FuseAttention(RewritePass):
    """optimum's plain attention (scores, mask, softmax, PV) as one ScaledDotProductAttention, with torch dynamo's
    grouped k/v reads and views folded into it."""

    name = "FuseAttention"
    rules = (*ATTENTION_FUSIONS, FOLD_QUERY_TRANSPOSE, *READ_GROUPED_KV, TRANSPOSE_THROUGH_VIEW)


class FuseElementwise(RewritePass):
    """Each elementwise region (a Cluster grown to a read budget) as one generated shader."""

    name = "FuseElementwise"
    rules = ELEMENTWISE_FUSIONS


ElementwiseFusionPass = FuseElementwise  # the name
