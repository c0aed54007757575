"""The graph IR every pass reads and edits.

Identity is the id: nodes and tensors get integer ids from their graph that are never reused, so a
pass can hold ids across edits. Names exist for display, errors and ONNX round trips. Every edit
goes through an `IrGraph` method that keeps producer/consumer tracking consistent; nothing else
mutates `node.inputs`. Node order is the insertion order, kept topological by the edit methods.
"""

from __future__ import annotations

import copy
import enum
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import OnyxiaError
from onyxia.core.shapes import Absent, TensorShape
from onyxia.core.values import TensorValue

__all__ = ["GraphError", "IrGraph", "IrNode", "TensorDef", "TensorKind", "TensorRef"]


class TensorKind(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    INITIALIZER = "initializer"
    INTERMEDIATE = "intermediate"


@dataclass
class TensorDef:
    """What is known about one tensor: dtype, shape, and (once folded) its value.

    `initializer` is weight data from the model file; `value` is a compile-time known numpy
    value (folded, a Constant, or a small initializer read for folding). Planning skips a node
    whose outputs all have a `value`.
    """

    id: int
    name: str
    dtype: DataType
    shape: TensorShape
    kind: TensorKind = TensorKind.INTERMEDIATE
    value: np.ndarray | None = None
    initializer: TensorValue | None = None

    @property
    def is_folded(self) -> bool:
        return self.value is not None

    def __str__(self) -> str:
        return f"%{self.id}:{self.dtype.short}{self.shape}"


TensorRef = int | TensorDef


@dataclass
class IrNode:
    """One operator application. `inputs` holds tensor ids, None for an omitted optional input."""

    id: int
    name: str
    op_type: str
    domain: str = ""
    inputs: list[int | None] = field(default_factory=list)
    outputs: list[int | None] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)
    opset: int = 0

    @property
    def qualified_op(self) -> str:
        return f"{self.domain}::{self.op_type}" if self.domain else self.op_type


class GraphError(OnyxiaError):
    """An edit would leave the graph inconsistent; nothing was changed."""


class IrGraph:
    """Nodes, tensors and the producer/consumer maps that stay in step with every edit."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.opset_imports: dict[str, int] = {}
        self.metadata: dict[str, str] = {}
        # (dim a, dim b, where): equalities shape rules assumed; checked when dims are bound
        self.constraints: list[tuple[Any, Any, str]] = []
        # output tensor id -> input tensor id whose GPU storage it shares (a KV cache updated in place,
        # a Reshape made a view by BufferAliasingPass); printed as "%out shares %in"
        self.aliases: dict[int, int] = {}
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self._nodes: dict[int, IrNode] = {}
        self._tensors: dict[int, TensorDef] = {}
        self._producer: dict[int, int] = {}
        self._consumers: dict[int, list[tuple[int, int]]] = {}
        self._ids = itertools.count()
        self._names: set[str] = set()  # tensor names
        self._node_names: set[str] = set()  # nodes have their own namespace, as in ONNX

    # ----- construction ------------------------------------------------------------------
    def add_tensor(
        self,
        name: str,
        dtype: DataType,
        shape: TensorShape,
        kind: TensorKind = TensorKind.INTERMEDIATE,
        *,
        value: np.ndarray | None = None,
        initializer: TensorValue | None = None,
    ) -> TensorDef:
        name = self.unique_name(name)
        tensor = TensorDef(next(self._ids), name, dtype, shape, kind, value, initializer)
        self._tensors[tensor.id] = tensor
        self._consumers[tensor.id] = []
        if kind is TensorKind.INPUT:
            self.inputs.append(tensor.id)
        return tensor

    def add_node(
        self,
        op_type: str,
        inputs: Sequence[TensorRef | None],
        outputs: Sequence[TensorRef | None],
        attributes: dict[str, Any] | None = None,
        *,
        domain: str = "",
        name: str | None = None,
        opset: int | None = None,
        before: IrNode | None = None,
    ) -> IrNode:
        """Append (or insert before `before`) a node; outputs must not have a producer yet."""
        out_ids = [self._tid(t) for t in outputs]
        for t in out_ids:
            if t is not None and t in self._producer:
                raise GraphError(f"tensor {self._tensors[t].name} already has a producer")
        node = IrNode(
            next(self._ids),
            self._unique(name or op_type, self._node_names),
            op_type,
            domain,
            [self._tid(t) for t in inputs],
            out_ids,
            dict(attributes or {}),
            opset if opset is not None else self.opset_imports.get(domain, 0),
        )
        if before is None:
            self._nodes[node.id] = node
        else:
            self._insert_before(before.id, node)
        self._link(node)
        return node

    def unique_name(self, base: str) -> str:
        """A tensor name not used yet (`base`, else `base_1`, `base_2`, ...)."""
        return self._unique(base, self._names)

    @staticmethod
    def _unique(base: str, taken: set[str]) -> str:
        name, n = base, 1
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        return name

    def mark_output(self, tensor: TensorRef) -> None:
        tid = self._tid(tensor)
        assert tid is not None
        self.outputs.append(tid)
        if self._tensors[tid].kind is TensorKind.INTERMEDIATE:
            self._tensors[tid].kind = TensorKind.OUTPUT

    # ----- queries -----------------------------------------------------------------------
    def node(self, node_id: int) -> IrNode:
        return self._nodes[node_id]

    def tensor(self, tensor: TensorRef) -> TensorDef:
        tid = self._tid(tensor)
        assert tid is not None
        return self._tensors[tid]

    def tensor_by_name(self, name: str) -> TensorDef | None:
        return next((t for t in self._tensors.values() if t.name == name), None)

    @property
    def nodes(self) -> list[IrNode]:
        """Snapshot of the nodes in their (topological) order."""
        return list(self._nodes.values())

    @property
    def tensors(self) -> list[TensorDef]:
        return list(self._tensors.values())

    def nodes_of(self, op_type: str, domain: str = "") -> list[IrNode]:
        return [n for n in self._nodes.values() if n.op_type == op_type and n.domain == domain]

    def tensor_producer(self, tensor: TensorRef) -> IrNode | None:
        node_id = self._producer.get(self._tid(tensor))  # type: ignore[arg-type]
        return None if node_id is None else self._nodes[node_id]

    def tensor_consumers(self, tensor: TensorRef) -> list[tuple[IrNode, int]]:
        """Snapshot of (node, input index) uses, safe to iterate while rewiring."""
        return [(self._nodes[n], i) for n, i in self._consumers[self._tid(tensor)]]  # type: ignore[index]

    def is_graph_output(self, tensor: TensorRef | None) -> bool:
        """False for None, so callers can ask about an optional slot (``node.outputs[i]``) directly."""
        return self._tid(tensor) in self.outputs

    def topological_order(self) -> list[IrNode]:
        """Nodes sorted so producers precede consumers (stable w.r.t. the current order)."""
        remaining = {n.id: sum(1 for t in set(n.inputs) if t is not None and t in self._producer) for n in self.nodes}
        ready = [n for n in self._nodes if remaining[n] == 0]
        order: list[IrNode] = []
        position = {nid: i for i, nid in enumerate(self._nodes)}
        while ready:
            ready.sort(key=position.__getitem__, reverse=True)
            node = self._nodes[ready.pop()]
            order.append(node)
            for t in node.outputs:
                if t is None:
                    continue
                for consumer in {c for c, _ in self._consumers[t]}:
                    remaining[consumer] -= 1
                    if remaining[consumer] == 0:
                        ready.append(consumer)
        if len(order) != len(self._nodes):
            stuck = [self._nodes[n].name for n, r in remaining.items() if r > 0]
            raise GraphError(f"graph '{self.name}' has a cycle through nodes {stuck[:5]}")
        return order

    # ----- edits -------------------------------------------------------------------------
    def set_input(self, node: IrNode, index: int, tensor: TensorRef | None) -> None:
        old = node.inputs[index]
        if old is not None:
            self._consumers[old].remove((node.id, index))
        new = self._tid(tensor)
        node.inputs[index] = new
        if new is not None:
            self._consumers[new].append((node.id, index))

    def replace_all_uses(self, old: TensorRef, new: TensorRef, *, outputs: bool = False) -> int:
        """Point every use of `old` at `new`; a graph output moves only when `outputs` is set."""
        old_id, new_id = self._tid(old), self._tid(new)
        assert old_id is not None and new_id is not None
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
        return new

    def remove_tensor(self, tensor: TensorRef) -> None:
        tid = self._tid(tensor)
        assert tid is not None
        if self._consumers[tid] or tid in self._producer or tid in self.outputs:
            raise GraphError(f"cannot remove tensor '{self._tensors[tid].name}': still in use")
        if tid in self.inputs:
            self.inputs.remove(tid)
        del self._tensors[tid]
        del self._consumers[tid]

    def check(self) -> None:
        """Verify the producer/consumer maps against the nodes; raise `GraphError` on drift."""
        for node in self._nodes.values():
            for i, t in enumerate(node.inputs):
                if t is not None and (node.id, i) not in self._consumers.get(t, []):
                    raise GraphError(f"node '{node.name}' input {i} is not tracked as a use")
            for t in node.outputs:
                if t is not None and self._producer.get(t) != node.id:
                    raise GraphError(f"node '{node.name}' output is not tracked as produced by it")
        for t, uses in self._consumers.items():
            for nid, i in uses:
                if nid not in self._nodes or self._nodes[nid].inputs[i] != t:
                    raise GraphError(f"stale use of tensor {t} by node {nid}")
        self.topological_order()

    def copy(self) -> IrGraph:
        """A deep copy of the structure; weight data (`TensorValue`) is shared, not copied."""
        memo = {id(t.initializer): t.initializer for t in self._tensors.values() if t.initializer is not None}
        return copy.deepcopy(self, memo)

    # ----- display -----------------------------------------------------------------------
    def format_node(self, node: IrNode) -> str:
        outs = ", ".join(self._fmt_tensor(t) for t in node.outputs)
        ins = ", ".join("None" if t is None else f"%{t}" for t in node.inputs)
        attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in sorted(node.attributes.items()))
        call = f"{node.qualified_op}({ins}{', ' if ins and attrs else ''}{attrs})"
        return f"{outs} = {call}  # {node.name}"

    def __str__(self) -> str:
        lines = [f"graph {self.name}("]
        lines += [f"  {self._fmt_tensor(t)}  # {self._tensors[t].name}" for t in self.inputs]
        lines.append(") {")
        lines += ["  " + self.format_node(n) for n in self._nodes.values()]
        lines += [f"  %{out} shares %{src}" for out, src in sorted(self.aliases.items())]
        lines.append("  return " + ", ".join(f"%{t}" for t in self.outputs))
        lines.append("}")
        return "\n".join(lines)

    def __iter__(self) -> Iterator[IrNode]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    # ----- internals ---------------------------------------------------------------------
    def _fmt_tensor(self, t: int | None) -> str:
        if t is None:
            return "None"
        tensor = self._tensors[t]
        shape = "absent" if isinstance(tensor.shape, Absent) else str(tensor.shape)
        return f"%{t}:{tensor.dtype.short}{shape}"

    @staticmethod
    def _tid(tensor: TensorRef | None) -> int | None:
        return tensor.id if isinstance(tensor, TensorDef) else tensor

    def _link(self, node: IrNode) -> None:
        for i, t in enumerate(node.inputs):
            if t is not None:
                if t not in self._tensors:
                    raise GraphError(f"node '{node.name}' input {i} refers to unknown tensor {t}")
                self._consumers[t].append((node.id, i))
        for t in node.outputs:
            if t is not None:
                self._producer[t] = node.id

    def _insert_before(self, anchor_id: int, node: IrNode) -> None:
        items = list(self._nodes.items())
        index = next(i for i, (nid, _) in enumerate(items) if nid == anchor_id)
        items.insert(index, (node.id, node))
        self._nodes = dict(items)


def _fmt_attr(value: Any) -> str:
    if isinstance(value, TensorValue):
        return f"tensor{list(value.dims)}"
    if isinstance(value, np.ndarray):
        return f"array{list(value.shape)}"
    return repr(value)
