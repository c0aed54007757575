"""ScaledDotProductAttention's second output: ai.onnx Attention's qk_matmul_output, [B, N, S, T].

The attention kernels stream keys through an online softmax and never hold a row of scores, so the
matrix comes from a kernel of its own (attention/sdpa_scores.wgsl), dispatched after them and only when
the node has the output (`onnx_attention` gives it one only when something reads qk_matmul_output). It
computes the scores with the same logit, bias and hidden keys (onyxia::sdpa_row), so mode 3's
probabilities are the ones the attention applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onyxia.core import PlanCtx, SymbolicDim, ceil_div, load_wgsl
from onyxia.operators.attention.gqa_cache import binding_defs

if TYPE_CHECKING:
    from onyxia.operators.attention.sdpa import SdpaGeometry

__all__ = ["plan_scores"]

_SOURCE = load_wgsl(__package__, "sdpa_scores.wgsl")
_WORKGROUP = 16  # query rows per workgroup (one invocation each)


def plan_scores(ctx: PlanCtx, g: SdpaGeometry, defs: dict[str, object], dims: dict[str, SymbolicDim]) -> None:
    """Dispatch the score-matrix kernel into output 1 (`defs` and `dims`: the attention kernels')."""
    from onyxia.operators.attention.sdpa import sdpa_reads

    reads, names = sdpa_reads(ctx)
    scores_defs = {**defs, **binding_defs([*names, "QK"]), "WORKGROUP_SIZE": _WORKGROUP}
    scores_defs["QK_MODE"] = ctx.attr_int("qk_mode", 0)
    shader = ctx.compile_shader("attention/sdpa_scores", _SOURCE, scores_defs, dims)
    ctx.dispatch(shader, reads, [ctx.output(1)], (ceil_div(g.seq, _WORKGROUP), g.heads, g.batch))
