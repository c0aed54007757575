"""`FoldTransposeIntoMatMul`: ``MatMul(x, Transpose(w))`` becomes com.onyxia ``MatMulTransB(x, w)``.

Targets tied lm heads (optimum's Gemma 3 export: ``MatMul(h, Transpose(embed_tokens, perm=[1, 0]))``).
The 262144 x 640 table is far over the fold limit, so without this the transpose would run on the
GPU every step and keep a second 671 MB copy alive. MatMulTransB reads `w` as [..., N, K] in place.

Declines (returns False, graph unchanged) when the Transpose:
- permutes anything but the last two axes (only a swap of those two is "b stored transposed");
- has another consumer or is a graph output (it would run anyway, so nothing is saved);
and when the MatMul is already folded (it emits no GPU step).
"""

from __future__ import annotations

import logging

from onyxia.core import IrGraph, IrNode, OperatorRegistry, Stage
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["FoldTransposeIntoMatMul"]

log = logging.getLogger(__name__)


class FoldTransposeIntoMatMul:
    name = "FoldTransposeIntoMatMul"
    stage = Stage.OPTIMIZATION

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        folded = sum(_fold(graph, node) for node in graph.nodes_of("MatMul"))
        log.info("%s: folded %d transposes", self.name, folded)
        return folded > 0


def _fold(graph: IrGraph, matmul: IrNode) -> bool:
    transpose = _swapping_transpose(graph, matmul)
    if transpose is None:
        return False
    t_out = transpose.outputs[0]
    assert t_out is not None
    if len(graph.tensor_consumers(t_out)) > 1 or graph.is_graph_output(t_out):
        log.debug("%s: declined %s, Transpose %s has other uses", FoldTransposeIntoMatMul.name, matmul.name, t_out)
        return False
    if all(t is not None and graph.tensor(t).value is not None for t in matmul.outputs):
        return False
    graph.opset_imports.setdefault(ONYXIA_DOMAIN, 1)
    graph.replace_node(matmul, "MatMulTransB", [matmul.inputs[0], transpose.inputs[0]], domain=ONYXIA_DOMAIN)
    graph.remove_node(transpose)
    graph.remove_tensor(t_out)
    return True


def _swapping_transpose(graph: IrGraph, matmul: IrNode) -> IrNode | None:
    """The default-domain Transpose feeding `matmul`'s b when it swaps exactly the last two axes."""
    b = matmul.inputs[1]
    producer = None if b is None else graph.tensor_producer(b)
    if producer is None or producer.op_type != "Transpose" or producer.domain != "" or producer.inputs[0] is None:
        return None
    rank = len(graph.tensor(producer.inputs[0]).shape.dims)  # type: ignore[union-attr]
    perm = list(producer.attributes.get("perm", range(rank - 1, -1, -1)))  # ONNX default: reverse
    if rank < 2 or perm != [*range(rank - 2), rank - 1, rank - 2]:
        log.debug(
            "%s: declined %s, perm %s is not a last-two-axes swap", FoldTransposeIntoMatMul.name, matmul.name, perm
        )
        return None
    return producer
