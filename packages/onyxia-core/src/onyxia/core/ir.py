"""The graph IR every pass reads and edits.

Identity is the id: nodes and tensors get integer ids from their graph that are never reused, so a
pass can hold ids across edits. Names exist for display, errors and ONNX round trips. Every edit
goes through an `IrGraph` method that keeps producer/consumer tracking consistent; nothing else
mutates `node.inputs`. Node order is the insertion order, kept topological by the edit methods.

This module is the IR's public face; the pieces live beside it, one job each:

- `ir_records`: `TensorDef`, `IrNode`, `TensorKind`, `TensorRef`, `GraphError` (plain data)
- `ir_store`: `GraphStore`: ids, names and the producer/consumer maps; add and look up
- `ir_edit`: `GraphEditor`: `set_input`, `replace_all_uses`, `replace_node`, `remove_node`, ...
- `ir_graph`: `IrGraph` itself, adding `topological_order`, `check`, `copy` and printing
- `ir_format`: the printed form, `%12:f32[batch,seq,640] = Add(%10, %11)  # name`
"""

from __future__ import annotations

from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import GraphError, IrNode, TensorDef, TensorKind, TensorRef

__all__ = ["GraphError", "IrGraph", "IrNode", "TensorDef", "TensorKind", "TensorRef"]
