"""`If` nodes whose two branches are constants become a run-time `Where` between them.

The onnxruntime-genai builder writes Phi-3's LongRoPE cache switch as ``If(Greater(total_length,
original_max_position_embeddings))`` with each branch two `Constant`s (the long and the short cos/sin
caches). Both branches are compile-time data of one shape, so selecting between them per run is
``Where(cond, then, else)``: both caches stay on the GPU, the condition is evaluated every run from the
current dims, and nothing is recompiled when the sequence crosses the threshold. Branches whose
tensors differ only in their row count (64 short rows against 512 long ones) may still be selected when
every reader indexes the rows by position (GroupQueryAttention's and RotaryEmbedding's cos/sin caches):
the shorter one is padded with zero rows that no valid position reads. Any other `If` keeps the loader's
"subgraphs are not supported" error.
"""

from __future__ import annotations

import numpy as np

import onnx
from onnx import helper, numpy_helper

__all__ = ["select_constant_ifs"]


def select_constant_ifs(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every constant-branch `If` of the main graph replaced (a copy when any is)."""
    readers = _position_readers(model.graph)
    if not any(_constant_branches(node, readers) for node in model.graph.node):
        return model
    model = onnx.ModelProto.FromString(model.SerializeToString())
    nodes: list[onnx.NodeProto] = []
    for node in model.graph.node:
        branches = _constant_branches(node, readers)
        if branches is None:
            nodes.append(node)
            continue
        then_values, else_values = branches
        for k, (output, a, b) in enumerate(zip(node.output, then_values, else_values, strict=True)):
            names = (f"{node.name}/then_{k}", f"{node.name}/else_{k}")
            model.graph.initializer.extend([numpy_helper.from_array(a, names[0]), numpy_helper.from_array(b, names[1])])
            nodes.append(helper.make_node("Where", [node.input[0], *names], [output], name=f"{node.name}/select_{k}"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def _constant_branches(node: onnx.NodeProto, position_read: set[str]) -> tuple[list, list] | None:
    """The (then, else) output values when both branches only hold Constants of one dtype and shape
    (or row counts that differ, for outputs only read as position-indexed caches: then padded)."""
    if node.op_type != "If" or node.domain not in ("", "ai.onnx"):
        return None
    graphs = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    if set(graphs) != {"then_branch", "else_branch"}:
        return None
    values = [_constants(graphs["then_branch"]), _constants(graphs["else_branch"])]
    if values[0] is None or values[1] is None or len(values[0]) != len(node.output):
        return None
    then_values, else_values = [], []
    for name, a, b in zip(node.output, values[0], values[1], strict=True):
        if a.dtype != b.dtype or a.shape[1:] != b.shape[1:] or (a.shape != b.shape and name not in position_read):
            return None
        rows = max(a.shape[0], b.shape[0]) if a.ndim else 0
        then_values.append(_pad_rows(a, rows))
        else_values.append(_pad_rows(b, rows))
    return then_values, else_values


def _pad_rows(array: np.ndarray, rows: int) -> np.ndarray:
    if array.ndim == 0 or array.shape[0] == rows:
        return array
    return np.concatenate([array, np.zeros((rows - array.shape[0], *array.shape[1:]), array.dtype)])


_POSITION_INDEXED = {("com.microsoft", "GroupQueryAttention"): (7, 8), ("com.microsoft", "RotaryEmbedding"): (2, 3)}


def _position_readers(graph: onnx.GraphProto) -> set[str]:
    """Tensors read only as cos/sin caches (rows indexed by position)."""
    cache: set[str] = set()
    other: set[str] = set()
    for node in graph.node:
        slots = _POSITION_INDEXED.get((node.domain, node.op_type), ())
        for index, name in enumerate(node.input):
            (cache if index in slots else other).add(name)
    other |= {o.name for o in graph.output}
    return cache - other


def _constants(graph: onnx.GraphProto) -> list | None:
    """The branch's outputs, in order, when it is nothing but `Constant` nodes with a `value` tensor."""
    made = {}
    for node in graph.node:
        if node.op_type != "Constant" or node.input or len(node.attribute) != 1 or node.attribute[0].name != "value":
            return None
        made[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    if graph.initializer or any(o.name not in made for o in graph.output):
        return None
    return [made[o.name] for o in graph.output]
