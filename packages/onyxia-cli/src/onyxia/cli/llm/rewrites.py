"""Graph rewrites the LLM session applies before compiling, each a plain function of the graph.

- `logits_for_last_position`: generation needs one row of logits, so the lm head (the largest
  matmul of the model: 262144 x 640 for Gemma 3 270m) runs on the last position only;
- `add_next_token`: greedy decoding reads back one token id, computed by ArgMax on the GPU;
- `alias_kv_cache`: present.N.* is written into past_key_values.N.*'s buffer, so a decode step
  appends one position instead of copying the whole cache.
"""

from __future__ import annotations

import logging

import numpy as np

from onyxia.core import Absent, DataType, IrGraph, IrNode, TensorKind, TensorValue, shape_of
from onyxia.core.symbolic import simplify_dim

__all__ = ["NEXT_TOKEN", "add_next_token", "alias_kv_cache", "logits_for_last_position"]

log = logging.getLogger(__name__)

NEXT_TOKEN = "next_token"
_HEAD_OPS = {("", "MatMul"), ("com.microsoft", "MatMulNBits"), ("", "Gemm")}
_PASS_THROUGH = {"Cast", "Div", "Mul", "Tanh", "Add", "Identity"}  # softcapping and dtype casts after the head
_IN_PLACE = {("com.microsoft", "GroupQueryAttention"), ("", "Concat")}


def _constant(graph: IrGraph, name: str, values: list[int]) -> int:
    array = np.array(values, np.int64)
    tensor = graph.add_tensor(
        name, DataType.INT64, shape_of(array.shape), TensorKind.INITIALIZER, initializer=TensorValue.from_numpy(array)
    )
    return tensor.id


def _lm_head(graph: IrGraph, logits: int) -> IrNode | None:
    node = graph.tensor_producer(logits)
    while node is not None and (node.domain, node.op_type) not in _HEAD_OPS:
        if node.op_type not in _PASS_THROUGH:
            return None
        produced = [t for t in node.inputs if t is not None and graph.tensor_producer(t) is not None]
        if len(produced) != 1:
            return None
        node = graph.tensor_producer(produced[0])
    return node


def _first_cast(graph: IrGraph, head: IrNode) -> IrNode:
    """The first of the Casts feeding `head` alone (exports round the final norm to f16 before it).

    Slicing before them keeps the norm -> f32-to-f16 Cast -> head chain that MatchOnnxruntimeCpuFloat16
    shortens as onnxruntime does (the head reads the unrounded f32 norm); a Slice in between would stop it."""
    node = head
    while (t := node.inputs[0]) is not None and len(graph.tensor_consumers(t)) == 1:
        producer = graph.tensor_producer(t)
        if producer is None or producer.op_type != "Cast" or producer.inputs[0] is None:
            break
        node = producer
    return node


def logits_for_last_position(graph: IrGraph, logits_name: str) -> bool:
    """Slice the lm head's input to its last position; False (graph unchanged) if no head is found."""
    logits = graph.tensor_by_name(logits_name)
    head = _lm_head(graph, logits.id) if logits is not None else None
    if head is None or head.inputs[0] is None:
        log.warning("no lm head found before '%s'; logits are computed for every position", logits_name)
        return False
    head = _first_cast(graph, head)
    hidden = graph.tensor(head.inputs[0])  # type: ignore[arg-type]  # set: _first_cast stops at a Cast that has one
    last = graph.add_tensor(f"{hidden.name}/last_position", hidden.dtype, Absent())
    starts = _constant(graph, "onyxia/last_position/starts", [-1])
    ends = _constant(graph, "onyxia/last_position/ends", [2**31 - 1])
    axes = _constant(graph, "onyxia/last_position/axes", [-2])
    graph.add_node("Slice", [hidden.id, starts, ends, axes], [last], name="onyxia/last_position", before=head)
    graph.set_input(head, 0, last)
    return True


def add_next_token(graph: IrGraph, logits_name: str) -> None:
    """A `next_token` output: ArgMax over the vocabulary of the (last-position) logits."""
    logits = graph.tensor_by_name(logits_name)
    assert logits is not None
    token = graph.add_tensor(NEXT_TOKEN, DataType.INT64, Absent())
    graph.add_node("ArgMax", [logits.id], [token], {"axis": -1, "keepdims": 0}, name="onyxia/next_token")
    graph.mark_output(token)


def alias_kv_cache(graph: IrGraph, pairs: list[tuple[str, str]], dims: dict[str, int]) -> list[tuple[str, str]]:
    """Alias each (past, present) pair whose producer can append in place; returns the pairs aliased.

    In place needs the cache to grow at its end in memory: batch and KV heads of 1 (dims before the
    sequence axis all 1), true of the Gemma 3 family; other pairs keep a GPU copy per step."""
    aliased = []
    for past_name, present_name in pairs:
        past, present = graph.tensor_by_name(past_name), graph.tensor_by_name(present_name)
        producer = graph.tensor_producer(present.id) if present is not None else None
        if past is None or producer is None or (producer.domain, producer.op_type) not in _IN_PLACE:
            continue
        leading = [simplify_dim(d, dims) for d in past.shape.dims[:2]]  # type: ignore[union-attr]
        if past.id not in producer.inputs or any(d != 1 for d in leading):
            continue
        graph.aliases[present.id] = past.id  # type: ignore[union-attr]
        aliased.append((past_name, present_name))
    return aliased
