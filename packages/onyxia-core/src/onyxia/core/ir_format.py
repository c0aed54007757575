"""The one printed form of the IR, shared by logs, `ONYXIA_DUMP_IR` dumps and golden tests.

    %12:f32[batch,seq,640] = Add(%10, %11)  # model/layers.0/Add_3

Tensors print by id with dtype and shape (names go in the trailing comment) so a dump lines up
with the ids passes hold. Only the graph's public queries are read, so printing cannot disturb it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onyxia.core.ir_records import IrNode
from onyxia.core.ir_store import GraphStore
from onyxia.core.shapes import Absent
from onyxia.core.values import TensorValue

__all__ = ["format_graph", "format_node"]


def format_node(graph: GraphStore, node: IrNode) -> str:
    outs = ", ".join(_fmt_tensor(graph, t) for t in node.outputs)
    ins = ", ".join("None" if t is None else f"%{t}" for t in node.inputs)
    attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in sorted(node.attributes.items()))
    call = f"{node.qualified_op}({ins}{', ' if ins and attrs else ''}{attrs})"
    return f"{outs} = {call}  # {node.name}"


def format_graph(graph: GraphStore) -> str:
    lines = [f"graph {graph.name}("]
    lines += [f"  {_fmt_tensor(graph, t)}  # {graph.tensor(t).name}" for t in graph.inputs]
    lines.append(") {")
    lines += ["  " + format_node(graph, n) for n in graph.nodes]
    lines += [f"  %{out} shares %{src}" for out, src in sorted(graph.aliases.items())]
    lines.append("  return " + ", ".join(f"%{t}" for t in graph.outputs))
    lines.append("}")
    return "\n".join(lines)


def _fmt_tensor(graph: GraphStore, t: int | None) -> str:
    if t is None:
        return "None"
    tensor = graph.tensor(t)
    shape = "absent" if isinstance(tensor.shape, Absent) else str(tensor.shape)
    return f"%{t}:{tensor.dtype.short}{shape}"


def _fmt_attr(value: Any) -> str:
    # Weights and folded arrays print as their shape: a dump must stay one line per node.
    if isinstance(value, TensorValue):
        return f"tensor{list(value.dims)}"
    if isinstance(value, np.ndarray):
        return f"array{list(value.shape)}"
    return repr(value)
