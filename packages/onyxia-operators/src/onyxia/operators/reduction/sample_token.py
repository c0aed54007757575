"""`SampleTokenOp` (com.onyxia SampleToken): the next token id drawn on the GPU from the logits.

An LLM session that samples would otherwise read a whole logits row back each step and draw on the
host, so the next step could not be submitted before this one's token is known. Here the draw's
random number is an input (the host takes it from its seeded generator; it does not depend on the
token), and the id stays on the GPU to feed the next step. Inputs: logits [..., V] (float) and params
float [3] = (temperature, top_k, u), or [B, 3] with a triple per batch row (B: the logits' first dim;
a batched step's sequences each sample by their own request): temperature <= 0 is
ArgMax over the last axis (first index on ties), else top-k (0: off; ties at the k-th score kept) and
temperature sampling by the inverse CDF at u in [0, 1). Output: int64 ids [...] (the logits' shape
without the last axis). Top-p and repetition penalties stay on the host (`onyxia.cli.llm.sampling`):
they need the sorted distribution and the history.

An optional third input, mask int32 [B, ceil(V / 32)] (B: the logits' first dim), is an allowed-token bitmask
per batch row (llguidance's layout: bit j % 32 of word j / 32 allows id j): grammar-constrained decoding
computes it on the host and uploads it, so the logits are never read back to apply it. Ids whose bit is 0 are
drawn as if their logit were -inf; words past V are ignored; a row that allows nothing gives id -1. Without
the input the shader has no mask code at all (the MASKED def)."""

from __future__ import annotations

from onyxia.core import DataType, InferenceCtx, OperatorBase, PlanCtx, TensorType, load_wgsl, shape_of
from onyxia.core.adapter_facts import adapter_facts
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.layout import type_defs
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["SAMPLE_TOKEN", "SampleTokenOp"]

_SOURCE = load_wgsl(__package__, "sample_token.wgsl")
# A row's workgroup: llvmpipe runs a workgroup on one core, where wider ones only add barrier steps; on a GPU
# each invocation's chunk is a chain of dependent loads (an H200 spent 0.70 ms of Gemma 3's 6.4 ms step on the
# 262,144 ids at 64 invocations, 4,096 loads each), so it takes as many invocations as a workgroup allows.
_CPU_WORKGROUP = 64
_GPU_WORKGROUP = 256  # WebGPU's default maxComputeInvocationsPerWorkgroup


def _workgroup() -> int:
    facts = adapter_facts()
    return _CPU_WORKGROUP if facts.cpu else min(_GPU_WORKGROUP, facts.invocations_per_workgroup)


PARAMS = 3  # temperature, top_k, u


class SampleTokenOp(OperatorBase):
    name = "SampleToken"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dims = ctx.input_dims(0)
        if not dims or dims[-1] == 0:
            raise ctx.error(f"logits (input 0) have dims {list(dims)}; expected a non-empty last axis (the vocabulary)")
        params = ctx.input_shape(1)
        if isinstance(params, Absent) or params.dims not in ((PARAMS,), (dims[0], PARAMS)):
            raise ctx.error(
                f"params (input 1) have shape {params}; expected [3] (temperature, top_k, u) or [{dims[0]}, 3] (a "
                "triple per batch row, the logits' first dim)"
            )
        if ctx.has_input(2):
            words = (dims[-1] + 31) // 32 if isinstance(dims[-1], int) else None
            mask = ctx.input_shape(2)
            if isinstance(mask, Absent) or len(mask.dims) != 2 or mask.dims[0] != dims[0] or mask.dims[1] != words:
                raise ctx.error(
                    f"mask (input 2) has shape {mask}; expected [{dims[0]}, {words}] (ceil(V / 32) int32 words of "
                    "allowed-token bits per batch row)"
                )
        return [TensorType(DataType.INT64, shape_of(dims[:-1]))]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, FLOATS)
        require_dtype(ctx, ctx.input_dtype(1), frozenset({DataType.FLOAT}))
        dims = ctx.input_dims(0)
        rows = dims_product(dims[:-1])
        if rows == 0:
            return
        defs = {**type_defs(T=dtype), "WORKGROUP_SIZE": _workgroup()}
        sizes = {"ROWS": rows, "V": dims[-1]}
        if ctx.input_rank(1) == 2:
            defs["PER_ROW"] = True
            sizes["ROWS_PER_TRIPLE"] = dims_product(dims[1:-1])  # logits rows of one batch row
        inputs = [ctx.input(0), ctx.input(1)]
        if ctx.has_input(2):
            require_dtype(ctx, ctx.input_dtype(2), frozenset({DataType.INT32}))
            defs["MASKED"] = True
            sizes["MASK_WORDS"] = ctx.input_dims(2)[1]
            sizes["ROWS_PER_MASK"] = dims_product(dims[1:-1])  # logits rows of one batch row
            inputs.append(ctx.input(2))
        shader = ctx.compile_shader("reduction/sample_token", _SOURCE, defs, sizes)
        ctx.dispatch(shader, inputs, [ctx.output(0)], rows)


SAMPLE_TOKEN: dict[str, SampleTokenOp] = {"SampleToken": SampleTokenOp()}
