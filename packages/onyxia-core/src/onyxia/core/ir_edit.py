"""`GraphEditor`: rewiring and removal, the edits passes make, each keeping the use maps in step.

Passes never touch `node.inputs` or the maps themselves; they call these methods, which update
both sides together. The guard rails follow onnx-ir and torch.fx: moving a graph output needs
`outputs=True`, and removing a node or tensor that is still used raises `GraphError` before
anything changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from onyxia.core.ir_records import GraphError, IrNode, TensorRef
from onyxia.core.ir_store import GraphStore

__all__ = ["GraphEditor"]


class GraphEditor(GraphStore):
    """The store plus the edits that rewire uses and take nodes and tensors out."""

    def set_input(self, node: IrNode, index: int, tensor: TensorRef | None) -> None:
        old = node.inputs[index]
        if old is not None:
            self._consumers[old].remove((node.id, index))
        new = self._tid(tensor)
        node.inputs[index] = new
        if new is not None:
            self._consumers[new].append((node.id, index))

    def replace_all_uses(self, old: TensorRef | None, new: TensorRef | None, *, outputs: bool = False) -> int:
        """Point every use of `old` at `new`; a graph output moves only when `outputs` is set."""
        old_id, new_id = self._require(old, "replace_all_uses() old"), self._require(new, "replace_all_uses() new")
        if old_id in self.outputs and not outputs:
            raise GraphError(
                f"tensor '{self._tensors[old_id].name}' is an output of graph '{self.name}'; "
                "pass outputs=True to move it"
            )
        uses = self.tensor_consumers(old_id)
        for node, index in uses:
            self.set_input(node, index, new_id)
        if outputs:
            self.outputs = [new_id if t == old_id else t for t in self.outputs]
        return len(uses)

    def remove_node(self, node: IrNode, *, safe: bool = True) -> None:
        """Remove `node`; with `safe`, refuse (changing nothing) while its outputs are used."""
        if safe:
            for t in node.outputs:
                if t is None:
                    continue
                if self._consumers[t] or t in self.outputs:
                    raise GraphError(
                        f"cannot remove node '{node.name}' ({node.op_type}): "
                        f"output '{self._tensors[t].name}' is still used"
                    )
        for i, t in enumerate(node.inputs):
            if t is not None:
                self._consumers[t].remove((node.id, i))
        for t in node.outputs:
            if t is not None and self._producer.get(t) == node.id:
                del self._producer[t]
        del self._nodes[node.id]
        self._unplace(node.id)
        self._node_names.discard(node.name)

    def replace_node(
        self,
        old: IrNode,
        op_type: str,
        inputs: Sequence[TensorRef | None],
        attributes: dict[str, Any] | None = None,
        *,
        domain: str = "",
        outputs: Sequence[TensorRef | None] | None = None,
    ) -> IrNode:
        """Put a new node in `old`'s place that produces `old`'s outputs (or `outputs`).

        The usual fusion edit: consumers and graph outputs keep their tensor ids. Multi-node
        rewrites use `add_node(before=...)`, `replace_all_uses` and `remove_node` instead.
        """
        out = list(old.outputs) if outputs is None else [self._tid(t) for t in outputs]
        for i, t in enumerate(old.inputs):
            if t is not None:
                self._consumers[t].remove((old.id, i))
        for t in old.outputs:
            if t is not None and self._producer.get(t) == old.id:
                del self._producer[t]
        self._node_names.discard(old.name)
        new = self.add_node(op_type, inputs, out, attributes, domain=domain, name=old.name, before=old)
        del self._nodes[old.id]
        self._unplace(old.id)
        return new

    def drop_output(self, node: IrNode, index: int) -> None:
        """Leave optional output `index` of `node` out (its tensor must be unused); trailing empty slots go."""
        t = node.outputs[index]
        if t is None:
            return
        if self._consumers[t] or t in self.outputs:
            raise GraphError(f"cannot drop output '{self._tensors[t].name}' of node '{node.name}': still used")
        node.outputs[index] = None
        del self._producer[t]
        self.remove_tensor(t)
        while len(node.outputs) > 1 and node.outputs[-1] is None:
            node.outputs.pop()

    def remove_tensor(self, tensor: TensorRef | None) -> None:
        tid = self._require(tensor, "remove_tensor()")
        if self._consumers[tid] or tid in self._producer or tid in self.outputs:
            raise GraphError(f"cannot remove tensor '{self._tensors[tid].name}': still in use")
        if tid in self.inputs:
            self.inputs.remove(tid)
        del self._tensors[tid]
        del self._consumers[tid]
