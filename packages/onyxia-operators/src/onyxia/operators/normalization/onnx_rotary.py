"""ai.onnx RotaryEmbedding (opset 23), lowered to com.microsoft RotaryEmbedding, whose kernel and fusions
(a per-head RMSNorm folded in: RmsNormRotary, a layer's q and k paired) it then shares.

The two ops rotate alike (onnx/reference/ops/op_rotary_embedding.py against onnxruntime's contrib kernel:
pairs (k, k + R/2), or (2k, 2k + 1) interleaved, over the first R = rotary_embedding_dim elements of each
head). They differ in their inputs and in how the head size is found, which the lowering settles:

- inputs are (X, cos_cache, sin_cache, position_ids?) here, (X, position_ids, cos, sin) there;
- the head is X's last dim (4-D [B, N, S, H]) or hidden / num_heads (3-D), so the lowering always states
  num_heads and rotary_embedding_dim (the contrib op would otherwise take twice the cache width);
- without position_ids the caches are already per token, [B, S, R/2] (what the PyTorch exporter writes:
  ``RotaryEmbedding(x, Cos(freqs), Sin(freqs))``). They are read as a [B * S, R/2] table (a Reshape, a view)
  at ids ``b * S + s``: for one batch row that is the start position 0 (no ids tensor at all), for a static
  shape a constant, else ``Reshape(Range(0, B * S), [B, S])``.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, InferenceCtx, NodeCtx, TensorKind, TensorType
from onyxia.core.shapes import shape_of
from onyxia.core.values import TensorValue
from onyxia.operators.lowering import Body, LoweredOp
from onyxia.operators.typesets import FLOATS

__all__ = ["ONNX_ROTARY"]

_X, _COS, _SIN, _POSITIONS = range(4)


def _geometry(ctx: NodeCtx) -> tuple[int, int, int]:
    """(heads, head size, rotated elements per head), validated as onnx's reference checks them."""
    dims = list(ctx.input_dims(_X))
    dtype = ctx.input_dtype(_X)
    if dtype not in FLOATS or ctx.input_dtype(_COS) != dtype or ctx.input_dtype(_SIN) != dtype:
        raise ctx.error(f"X, cos_cache and sin_cache must share one float type; found {ctx.describe_inputs()}")
    if len(dims) == 4:
        heads, head = dims[1], dims[3]
    elif len(dims) == 3:
        heads = ctx.attr_int("num_heads", 0)
        hidden = dims[2]
        if heads <= 0 or not isinstance(hidden, int) or hidden % heads:
            raise ctx.error(f"a 3-D input needs num_heads dividing its hidden size {hidden}; num_heads is {heads}")
        head = hidden // heads
    else:
        raise ctx.error(f"input 0 has rank {len(dims)}; expected [B, S, hidden] or [B, N, S, H]")
    if not isinstance(heads, int) or not isinstance(head, int):
        raise ctx.error(f"the heads and head size must be static; found {ctx.describe_inputs()}")
    rotary = ctx.attr_int("rotary_embedding_dim", 0) or head
    if rotary % 2 or rotary > head:
        raise ctx.error(f"rotary_embedding_dim {rotary} must be even and at most the head size {head}")
    cos, sin = list(ctx.input_dims(_COS)), list(ctx.input_dims(_SIN))
    rank = 2 if _has_positions(ctx) else 3
    if len(cos) != rank or cos != sin or cos[-1] != rotary // 2:
        kind = "[max_position, R/2]" if rank == 2 else "[B, S, R/2] (no position_ids)"
        raise ctx.error(f"cos_cache and sin_cache must both be {kind} with R/2 = {rotary // 2}; found {cos}, {sin}")
    return heads, head, rotary


def _has_positions(ctx: NodeCtx) -> bool:
    return ctx.num_inputs > _POSITIONS and ctx.has_input(_POSITIONS)


def _infer(ctx: InferenceCtx) -> list[TensorType]:
    _geometry(ctx)
    return [TensorType(ctx.input_dtype(_X), ctx.input_shape(_X))]


def _lower(body: Body) -> list[int | None]:
    ctx = body.ctx
    heads, _, rotary = _geometry(ctx)
    cos, sin = body.required(_COS), body.required(_SIN)
    positions = body.input(_POSITIONS)
    if positions is None:
        width = _shared_ints(body, [-1, rotary // 2], f"table_{rotary // 2}")
        cos, sin = body.op("Reshape", cos, width), body.op("Reshape", sin, width)
        positions = _token_ids(body)
    attrs = {"interleaved": int(ctx.attr_int("interleaved", 0) != 0), "num_heads": heads}
    attrs["rotary_embedding_dim"] = rotary
    return [body.op("RotaryEmbedding", body.required(_X), positions, cos, sin, domain="com.microsoft", **attrs)]


def _token_ids(body: Body) -> int:
    """Ids b * S + s of the per-token caches read as one table."""
    batch, seq = body.ctx.input_dims(_COS)[:2]
    if batch == 1:
        return _shared_ints(body, [0], "start")  # one start position: ids 0 .. S - 1
    if isinstance(batch, int) and isinstance(seq, int):
        return body.const(np.arange(batch * seq, dtype=np.int64).reshape(batch, seq), "ids")
    shape = body.op("Shape", body.required(_COS), end=2)
    rows, cols = (body.op("Gather", shape, body.const(np.int64(i), f"axis_{i}")) for i in (0, 1))
    count = body.op("Mul", rows, cols)  # B * S, a symbolic value shape inference folds
    ids = body.op("Range", body.const(np.int64(0), "zero"), count, body.const(np.int64(1), "one"))
    return body.op("Reshape", ids, shape)


def _shared_ints(body: Body, values: list[int], label: str) -> int:
    """One initializer for every lowered RotaryEmbedding, so that a layer's q and k rotations read the same
    tensors (CSE then merges their table Reshapes and `pair_rms_norm_rotary` pairs them)."""
    found = body.graph.tensor_by_name(f"RotaryEmbedding/{label}")
    if found is not None:
        return found.id
    array = np.asarray(values, np.int64)
    name = f"RotaryEmbedding/{label}"
    stored = TensorValue.from_numpy(array, name)
    tensor = body.graph.add_tensor(
        name, DataType.INT64, shape_of([len(values)]), TensorKind.INITIALIZER, initializer=stored
    )
    tensor.value = array  # known to inference and folding at once, as `Body.const` makes it
    return tensor.id


ONNX_ROTARY: dict[tuple[str, int, int | None], LoweredOp] = {
    ("RotaryEmbedding", 23, None): LoweredOp("RotaryEmbedding", _infer, _lower),
}
