"""`ResidentKvCache`: every KV cache of a session stored [slots, kv_heads, capacity, head_size] and written in place.

Why one layout: an exported decoder returns present = past + new rows, which for more than one kv head (or
batch row) moves every cached row each step. The session instead keeps each cache in one resident buffer
with a fixed row stride (`onyxia.core.resident_kv`), aliases present to past, and tells the ops where each
batch row's rows live through the `KV_ROWS` input (slot, rows cached): writers append only the new rows,
readers index through the stride, and one run's batch rows may belong to any slots (continuous batching).

Which producers qualify (the graph's own cache writers, before any fusion):
- com.microsoft GroupQueryAttention: onnxruntime's past_present_share_buffer mode (the attribute is set on
  the node; the session binds the past's sequence dim to the capacity, `shared_buffer_dims`). A windowed
  genai cache (sliding_window_cache=1) becomes a full one: its node keeps `local_window_size`, which alone
  decides what attention sees, so its outputs are unchanged and no window shift runs;
- ``Concat(past, new, axis=2)`` (optimum), which `FuseKvCache` makes a KvAppend;
- ai.onnx Attention with past_key/past_value (PyTorch's exporter), lowered to the same KvAppend.
Any other producer keeps a copied cache (`LlmSession` carries present into past), with the reason logged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from onyxia.cli.llm.signature import KvPair
from onyxia.core import DataType, IrGraph, IrNode, OperatorRegistry, Stage, SymbolicDim, TensorKind, shape_of
from onyxia.core.resident_kv import KV_ROWS, ResidentKvLayout
from onyxia.operators.attention.gqa_resident import SHARE_BUFFER

__all__ = ["KV_ROWS", "ResidentKvCache", "shared_buffer_dims"]

log = logging.getLogger(__name__)


def _writer(graph: IrGraph, pair: KvPair) -> tuple[IrNode | None, str]:
    """The node that makes `pair.present` from `pair.past`, or None with the reason it cannot be resident."""
    past, present = graph.tensor_by_name(pair.past), graph.tensor_by_name(pair.present)
    if past is None or present is None:
        return None, "not in the graph"
    node = graph.tensor_producer(present.id)
    if node is None or past.id not in node.inputs:
        return None, "present is not made from past by one node"
    kind = (node.domain, node.op_type)
    if kind == ("com.microsoft", "GroupQueryAttention"):
        if node.attributes.get("sliding_window_cache", 0) and int(node.attributes.get("local_window_size", -1)) <= 0:
            return None, "a windowed GroupQueryAttention cache without local_window_size"
        return node, ""
    if kind == ("", "Concat"):
        axis = int(node.attributes.get("axis", 0))
        ok = node.inputs[0] == past.id and axis in (2, -2)
        return (node, "") if ok else (None, "a Concat that does not append to past along axis 2")
    if kind == ("", "Attention"):
        return node, ""
    return None, f"made by {node.op_type}, which has no in-place form"


def is_shared_buffer(graph: IrGraph, pair: KvPair) -> bool:
    """Whether `pair` is a GroupQueryAttention cache (its past dim is then the capacity)."""
    node, _ = _writer(graph, pair)
    return node is not None and node.op_type == "GroupQueryAttention"


def shared_buffer_dims(graph: IrGraph, pairs: Sequence[KvPair], capacity: int) -> dict[str, int]:
    """Static dims for GroupQueryAttention caches: their past length names the capacity (onnxruntime's
    shared-buffer convention), windowed ones included."""
    dims: dict[str, int] = {}
    for pair in pairs:
        length = pair.past_dims[2]
        if is_shared_buffer(graph, pair) and not isinstance(length, int):
            dims[str(length)] = capacity
    return dims


class ResidentKvCache:
    """Makes the session's caches resident (see the module docstring); `resident` lists the pairs after the run."""

    name = "ResidentKvCache"
    stage = Stage.RESOLUTION

    def __init__(self, pairs: Sequence[KvPair], capacity: int, batch: SymbolicDim) -> None:
        self.pairs = list(pairs)
        self.capacity = capacity
        self.batch = batch
        self.resident: list[tuple[str, str]] = []

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        if graph.resident_kv is not None:
            return False
        writers = []
        for pair in self.pairs:
            node, why = _writer(graph, pair)
            if node is None:
                log.info("%s stays a copied cache: %s", pair.present, why)
                continue
            writers.append((pair, node))
        if not writers:
            return False
        for pair, node in writers:
            if node.op_type == "GroupQueryAttention":
                node.attributes[SHARE_BUFFER] = 1
                node.attributes["sliding_window_cache"] = 0
            past, present = graph.tensor_by_name(pair.past), graph.tensor_by_name(pair.present)
            assert past is not None and present is not None, "checked by _writer"
            graph.aliases[present.id] = past.id
            self.resident.append((pair.past, pair.present))
        rows = graph.add_tensor(KV_ROWS, DataType.INT32, shape_of([self.batch, 2]), TensorKind.INPUT)
        caches = frozenset(graph.tensor_by_name(pair.past).id for pair, _ in writers)  # type: ignore[union-attr]
        graph.resident_kv = ResidentKvLayout(self.capacity, rows.id, caches)
        return True
