"""`BufferAliasingPass`: Reshape, Unsqueeze, Squeeze, Flatten and Identity become views, not copies.

None of them moves an element, so the output can live in the input's buffer: the pass records
``graph.aliases[output] = input`` and `MovementOp.plan` then emits no step (`ctx.shares_storage`).
Every decoder layer of a Gemma export reshapes q/k/v and its MLP input, each a full-size copy
dispatch and a second buffer without this. A view of a view chains (``out -> in -> root``); the
runtime resolves chains to the root buffer and sizes it for the largest member.

It runs in the PLANNING stage, after every rewrite, so no later pass can replace an aliased node
(a producer writing into a view's storage would write into its source). Declines when:
- either side is folded (no GPU storage to share) or the dtypes differ;
- the output already has an alias (state the session keeps in place);
- an in-place op writes the source's storage (a KV cache appended where it lives: a view taken
  before the append would not be one after it), or the output's;
- the output is a graph output and the storage is a graph input's: `run()` writes inputs and
  carries (present -> past copies) into input buffers, so the readback could see those bytes.
"""

from __future__ import annotations

import logging

from onyxia.core import Absent, IrGraph, IrNode, OperatorRegistry, Stage, TensorKind

__all__ = ["VIEW_OPS", "BufferAliasingPass"]

log = logging.getLogger(__name__)

VIEW_OPS = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"})


class BufferAliasingPass:
    name = "BufferAliasing"
    stage = Stage.PLANNING

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        aliased = sum(_alias_view(graph, node) for node in graph.nodes if _is_view_op(node))
        log.info("%s: %d movement ops became views", self.name, aliased)
        return aliased > 0


def _alias_view(graph: IrGraph, node: IrNode) -> bool:
    src, out = node.inputs[0] if node.inputs else None, node.outputs[0]
    if src is None or out is None or out in graph.aliases:
        return False
    source, view = graph.tensor(src), graph.tensor(out)
    if source.value is not None or view.value is not None or isinstance(view.shape, Absent):
        return False
    if source.dtype != view.dtype:
        return False
    root = _storage_root(graph, src)
    written = _written_in_place(graph)
    if root in written or out in written:
        log.debug("%s: declined %s, an in-place op writes its storage", BufferAliasingPass.name, node.name)
        return False
    if graph.is_graph_output(out) and graph.tensor(root).kind is TensorKind.INPUT:
        log.debug("%s: declined %s, a graph output viewing graph input storage", BufferAliasingPass.name, node.name)
        return False
    graph.aliases[out] = src
    return True


def _is_view_op(node: IrNode) -> bool:
    return node.domain == "" and node.op_type in VIEW_OPS


def _storage_root(graph: IrGraph, tensor: int) -> int:
    seen = {tensor}
    while tensor in graph.aliases:
        tensor = graph.aliases[tensor]
        if tensor in seen:
            break  # a cycle is the runtime's to report; here it only has to end
        seen.add(tensor)
    return tensor


def _written_in_place(graph: IrGraph) -> set[int]:
    """Storage roots an in-place op writes: targets of every alias that is not a view's."""
    written = set()
    for out, src in graph.aliases.items():
        producer = graph.tensor_producer(out)
        if producer is None or not _is_view_op(producer) or producer.inputs[0] != src:
            written.add(_storage_root(graph, src))
    return written
