"""`TokenLogprobsOp` (com.onyxia TokenLogprobs): log-probabilities of the sampled token and of the top k tokens,
computed on the GPU from the logits rows that ask for them.

An OpenAI client asking for `logprobs` wants, per generated token, log_softmax(logits)[token] and the k best
entries of that row. Reading the logits row back (1 MiB a token for a 262144-token vocabulary) would cost more
than the step; here one workgroup per asking row reduces the row to 1 + 2k floats. The values are the log-softmax
of the model's raw logits: before temperature, top-k or top-p (what vLLM returns by default, and what
onnxruntime's logits give through numpy's log_softmax).

Inputs: logits [..., V] (float), tokens int64 [...] (the logits' shape without the last axis: the id each row
sampled, SampleToken's output), rows int64 [R] (which logits rows, flattened, to compute; R is usually a
symbolic dim the session sets to 0 on steps where no row asks, so the dispatch is left out). Attribute k
(0..MAX_K). Output float [R, 1 + 2k]: the sampled token's log-probability, then the top k log-probabilities in
descending order (ties: lower id first, as TopK), then their ids as floats (exact: ids are below 2^24, checked).
"""

from __future__ import annotations

from onyxia.core import DataType, InferenceCtx, OperatorBase, PlanCtx, TensorType, load_wgsl, shape_of
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.layout import type_defs
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["MAX_K", "TOKEN_LOGPROBS", "TokenLogprobsOp"]

_SOURCE = load_wgsl(__package__, "token_logprobs.wgsl")
_WORKGROUP = 64  # llvmpipe runs a workgroup on one core: wider ones only add barrier steps there
MAX_K = 20  # OpenAI's top_logprobs limit; the candidates of every invocation fit workgroup memory (10 KiB)
_EXACT_IDS = 2**24  # float32 holds every integer below this


class TokenLogprobsOp(OperatorBase):
    name = "TokenLogprobs"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dims = ctx.input_dims(0)
        if not dims or dims[-1] == 0:
            raise ctx.error(f"logits (input 0) have dims {list(dims)}; expected a non-empty last axis (the vocabulary)")
        tokens, rows = ctx.input_shape(1), ctx.input_shape(2)
        if isinstance(tokens, Absent) or tuple(tokens.dims) != tuple(dims[:-1]):
            raise ctx.error(f"tokens (input 1) have shape {tokens}; expected {list(dims[:-1])} (the logits' rows)")
        if isinstance(rows, Absent) or len(rows.dims) != 1:
            raise ctx.error(f"rows (input 2) have shape {rows}; expected one dim (the logits rows to compute)")
        k = _k(ctx)
        return [TensorType(DataType.FLOAT, shape_of((rows.dims[0], 1 + 2 * k)))]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, FLOATS)
        for i, what in ((1, "tokens"), (2, "rows")):
            if ctx.input_dtype(i) != DataType.INT64:
                raise ctx.error(f"{what} (input {i}) is {ctx.input_dtype(i).name}; expected INT64")
        dims = ctx.input_dims(0)
        vocab = dims[-1]
        if isinstance(vocab, int) and vocab >= _EXACT_IDS:
            raise ctx.error(f"a vocabulary of {vocab} ids; the output holds ids as float32, exact below 2^24")
        count = ctx.input_dims(2)[0]
        if count == 0:
            return
        k = _k(ctx)
        defs = {**type_defs(T=dtype), "WORKGROUP_SIZE": _WORKGROUP, "K": k, "KS": max(k, 1)}
        defs["CANDIDATES"] = _WORKGROUP * max(k, 1)
        sizes = {"R": count, "V": vocab, "LOGIT_ROWS": dims_product(dims[:-1])}
        shader = ctx.compile_shader("reduction/token_logprobs", _SOURCE, defs, sizes)
        ctx.dispatch(shader, [ctx.input(0), ctx.input(1), ctx.input(2)], [ctx.output(0)], count)


def _k(ctx: InferenceCtx | PlanCtx) -> int:
    k = ctx.attr_int("k", 0)
    if not 0 <= k <= MAX_K:
        raise ctx.error(f"attribute k is {k}; expected 0 to {MAX_K}")
    return k


TOKEN_LOGPROBS: dict[str, TokenLogprobsOp] = {"TokenLogprobs": TokenLogprobsOp()}
