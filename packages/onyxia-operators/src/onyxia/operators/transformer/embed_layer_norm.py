"""com.microsoft EmbedLayerNormalization: BERT's embeddings and their LayerNorm as one node.

``EmbedLayerNormalization(input_ids, segment_ids?, word_embedding, position_embedding,
segment_embedding?, gamma, beta, mask?, position_ids?; epsilon)`` (onnxruntime's
contrib_ops/cpu/bert/embed_layer_norm.cc)::

    embedding_sum = word[input_ids] + position[position_ids or 0..S-1] + segment[segment_ids]
    output        = LayerNorm(embedding_sum, gamma, beta, epsilon) over the hidden axis
    mask_index    = per batch row, the count of mask entries equal to 1 (int32 [B]); zeros without mask

Lowered to Gather, Add, LayerNormalization and, for mask_index, Equal/Cast/ReduceSum: the ops the
plain export spells, so the embedding Gathers and the LayerNorm run the kernels their families own.
Ids out of range are reported at run time by Gather, as onnxruntime refuses them.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, InferenceCtx, SymbolicDim, TensorType
from onyxia.core.context import NodeCtx
from onyxia.core.shapes import shape_of
from onyxia.core.values import TensorValue
from onyxia.operators.lowering import Body, LoweredOp

__all__ = ["EMBED_LAYER_NORM"]

_IDS = {0: "input_ids", 1: "segment_ids", 7: "mask", 8: "position_ids"}
_TABLES = {2: "word_embedding", 3: "position_embedding", 4: "segment_embedding"}


def _check(ctx: NodeCtx) -> tuple[SymbolicDim, SymbolicDim, int]:
    """batch, sequence and hidden size, after onnxruntime's CheckInputs."""
    for i, role in _IDS.items():
        if ctx.has_input(i) and ctx.input_dtype(i) != DataType.INT32:
            raise ctx.error(f"input {i} ({role}) is {ctx.input_dtype(i).short}; expected int32")
    for i in (2, 3, 4, 5, 6):
        if ctx.has_input(i) and ctx.input_dtype(i) != DataType.FLOAT:
            raise ctx.error(f"input {i} is {ctx.input_dtype(i).short}; expected f32")
    if ctx.has_input(1) != ctx.has_input(4):
        raise ctx.error("segment_ids (input 1) and segment_embedding (input 4) come together or not at all")
    ids = ctx.input_dims(0)
    if len(ids) != 2:
        raise ctx.error(f"input_ids must be [batch, sequence]; found {list(ids)}")
    hidden = ctx.input_dims(2)[-1]
    if not isinstance(hidden, int):
        raise ctx.error(f"the hidden size must be static; found {ctx.describe_inputs()}")
    for i, role in _TABLES.items():
        if ctx.has_input(i) and (len(ctx.input_dims(i)) != 2 or ctx.input_dims(i)[1] != hidden):
            raise ctx.error(f"input {i} ({role}) must be [rows, {hidden}]; found {list(ctx.input_dims(i))}")
    for i in (5, 6):
        if list(ctx.input_dims(i)) != [hidden]:
            raise ctx.error(f"input {i} ({'gamma' if i == 5 else 'beta'}) must be [{hidden}]")
    for i in (1, 7):
        if ctx.has_input(i) and ctx.input_dims(i) != ids:
            raise ctx.error(f"input {i} ({_IDS[i]}) must have input_ids' shape {list(ids)}")
    if ctx.has_input(8) and list(ctx.input_dims(8)) not in ([ids[0], ids[1]], [1, ids[1]]):
        raise ctx.error(f"position_ids must be [batch, sequence] or [1, sequence]; found {list(ctx.input_dims(8))}")
    return ids[0], ids[1], hidden


def _infer(ctx: InferenceCtx) -> list[TensorType]:
    batch, seq, hidden = _check(ctx)
    hidden_states = TensorType(DataType.FLOAT, shape_of([batch, seq, hidden]))
    return [hidden_states, TensorType(DataType.INT32, shape_of([batch])), hidden_states]


def _lower(body: Body) -> list[int | None]:
    _check(body.ctx)
    ids = body.input(0)
    total = body.op("Gather", body.input(2), ids, axis=0)
    positions = body.input(8)
    if positions is None:
        seq = body.op("Gather", body.op("Shape", ids), body.const(np.int64(1), "seq_axis"), axis=0)
        positions = body.op("Range", body.const(np.int64(0), "zero"), seq, body.const(np.int64(1), "one"))
    total = body.op("Add", total, body.op("Gather", body.input(3), positions, axis=0))
    if body.input(1) is not None:
        total = body.op("Add", total, body.op("Gather", body.input(4), body.input(1), axis=0))
    epsilon = body.ctx.attr_float("epsilon", 1e-12)
    output = body.op("LayerNormalization", total, body.input(5), body.input(6), axis=-1, epsilon=epsilon)
    mask = body.input(7)
    if mask is not None:
        ones = body.op("Cast", body.op("Equal", mask, body.const(np.int32(1), "one_i32")), to=int(DataType.INT32))
        mask_index = body.op("ReduceSum", ones, body.ints([1], "rows"), keepdims=0)
    else:
        batch = body.op("Shape", ids, start=0, end=1)
        mask_index = body.op("ConstantOfShape", batch, value=TensorValue.from_numpy(np.zeros(1, np.int32)))
    return [output, mask_index, total]


EMBED_LAYER_NORM: dict[str, LoweredOp] = {
    "EmbedLayerNormalization": LoweredOp("EmbedLayerNormalization", _infer, _lower)
}
