"""Rewrites the operators package ships with the ops they produce, the cleanups that follow them and
the view aliasing that planning honours; `register_builtin` puts `default_passes()` on the registry,
and `CompilerPipeline` runs them in their stage."""

from onyxia.core import FixedPoint, Pass
from onyxia.operators.passes.alias_buffers import BufferAliasingPass
from onyxia.operators.passes.eliminate_common_subexpressions import CommonSubexpressionEliminationPass
from onyxia.operators.passes.eliminate_dead_code import DeadCodeEliminationPass
from onyxia.operators.passes.fuse_conv_epilogue import FuseConvEpilogue
from onyxia.operators.passes.fusions import (
    CancelTransposes,
    ElementwiseFusionPass,
    FoldTransposeIntoMatMul,
    FuseAttention,
    FuseElementwise,
    FuseKvCache,
    FuseMatMulBias,
    FuseMlpGate,
    FuseNormAddNorm,
    FuseResidualRmsNorm,
    FuseRmsNorm,
    FuseRmsNormIntoRotary,
    FuseRmsNormRotaryPair,
    FuseRotateHalf,
    GroupMatMuls,
    QuantizeInNorm,
    SimplifyElementwise,
)
from onyxia.operators.passes.insert_value_readbacks import InsertValueReadbacksPass
from onyxia.operators.passes.match_onnxruntime_cpu_float16 import MatchOnnxruntimeCpuFloat16

__all__ = [
    "BufferAliasingPass",
    "CancelTransposes",
    "CommonSubexpressionEliminationPass",
    "DeadCodeEliminationPass",
    "ElementwiseFusionPass",
    "FoldTransposeIntoMatMul",
    "FuseAttention",
    "FuseConvEpilogue",
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
    "InsertValueReadbacksPass",
    "MatchOnnxruntimeCpuFloat16",
    "SimplifyElementwise",
    "cleanup_passes",
    "default_passes",
]


def cleanup_passes() -> FixedPoint:
    """DCE and CSE settled together: a merge can leave a dead chain, a removal can expose a duplicate."""
    return FixedPoint([DeadCodeEliminationPass(), CommonSubexpressionEliminationPass()], name="Cleanup")


def default_passes() -> list[Pass]:
    """Fresh instances, in the order they run within their stage.

    Rewrites first, then the cleanup: CSE merging two Transposes would give the merged one two
    consumers, which FoldTransposeIntoMatMul (like most fusions) declines. FuseElementwise comes after
    the cleanup (a duplicated chain is merged before it is fused, a dead one removed) and after the
    rewrites that match single elementwise nodes (FuseMlpGate takes an MLP's Gelu and Mul into the
    gate/up group GroupMatMuls made; FuseAttention takes the attention's scaling Muls, mask Add and NaN
    Where). Aliasing is PLANNING, after every rewrite. InsertValueReadbacks is RESOLUTION: values
    that size outputs but come from data must be read back before inference needs them."""
    return [
        InsertValueReadbacksPass(),
        CancelTransposes(),
        SimplifyElementwise(),
        FoldTransposeIntoMatMul(),
        FuseMatMulBias(),
        GroupMatMuls(),
        FuseMlpGate(),
        FuseRmsNorm(),
        FuseRotateHalf(),
        FuseRmsNormIntoRotary(),
        FuseRmsNormRotaryPair(),
        FuseResidualRmsNorm(),
        FuseNormAddNorm(),
        QuantizeInNorm(),
        FuseKvCache(),
        FuseAttention(),
        FuseConvEpilogue(),
        cleanup_passes(),
        FuseElementwise(),
        BufferAliasingPass(),
    ]
