"""`GraphStore`: the bottom layer of `IrGraph` — ids, names, the producer/consumer maps, add and look up.

It owns the state every other layer relies on: ids come from one counter and are never reused,
tensor and node names each have their own namespace (as in ONNX), and `_link` is the one place a
new node's uses and outputs enter the maps. Rewiring and removal build on it in
`onyxia.core.ir_edit`; use the complete `IrGraph` (`onyxia.core.ir`), not this layer directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.ir_records import GraphError, IrNode, TensorDef, TensorKind, TensorRef
from onyxia.core.resident_kv import ResidentKvLayout
from onyxia.core.shapes import TensorShape
from onyxia.core.values import TensorValue

__all__ = ["GraphStore"]


class GraphStore:
    """Nodes and tensors by id, in insertion order, with who produces and who consumes each tensor."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.opset_imports: dict[str, int] = {}
        self.metadata: dict[str, str] = {}
        # (dim a, dim b, where): equalities shape rules assumed; checked when dims are bound
        self.constraints: list[tuple[Any, Any, str]] = []
        # node id -> {dim name: why}: symbolic dims whose run-time value decides a structure shape inference
        # had to pick (an axes-less Squeeze's rank); re-inferring the node replaces its entry
        self.static_required: dict[int, dict[str, str]] = {}
        # output tensor id -> input tensor id whose GPU storage it shares (a KV cache updated in place,
        # a Reshape made a view by BufferAliasingPass); printed as "%out shares %in"
        self.aliases: dict[int, int] = {}
        # the LLM session's KV caches, stored [slots, kv_heads, capacity, head_size] (`onyxia.core.resident_kv`)
        self.resident_kv: ResidentKvLayout | None = None
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self._nodes: dict[int, IrNode] = {}
        self._tensors: dict[int, TensorDef] = {}
        self._producer: dict[int, int] = {}
        self._consumers: dict[int, list[tuple[int, int]]] = {}
        self._ids = itertools.count()
        self._names: set[str] = set()  # tensor names
        self._node_names: set[str] = set()  # nodes have their own namespace, as in ONNX
        self._suffixes: dict[tuple[bool, str], int] = {}  # (node namespace?, base name) -> next suffix to try
        # graph order is a doubly linked list over node ids, so inserting before a node costs O(1);
        # the ordered snapshot and the positions are rebuilt on the first read after an edit
        self._next: dict[int, int | None] = {}
        self._prev: dict[int, int | None] = {}
        self._head: int | None = None
        self._tail: int | None = None
        self._ordered: list[IrNode] | None = None
        self._keys: dict[int, float] = {}  # order keys: between a node's neighbours' on insertion

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
        self._nodes[node.id] = node
        self._place(node.id, None if before is None else before.id)
        self._link(node)
        return node

    def unique_name(self, base: str) -> str:
        """A tensor name not used yet (`base`, else `base_1`, `base_2`, ...)."""
        return self._unique(base, self._names)

    def _unique(self, base: str, taken: set[str]) -> str:
        """`base`, else `base_N` for the first free N; the next N to try is kept per base, so naming
        the ten-thousandth "Neg" costs what naming the second did."""
        name = base
        if name in taken:
            key = (taken is self._node_names, base)
            n = self._suffixes.get(key, 1)
            while (name := f"{base}_{n}") in taken:
                n += 1
            self._suffixes[key] = n + 1
        taken.add(name)
        return name

    def mark_output(self, tensor: TensorRef) -> None:
        tid = self._tid(tensor)
        self.outputs.append(tid)
        if self._tensors[tid].kind is TensorKind.INTERMEDIATE:
            self._tensors[tid].kind = TensorKind.OUTPUT

    # ----- queries -----------------------------------------------------------------------
    def node(self, node_id: int) -> IrNode:
        return self._nodes[node_id]

    def tensor(self, tensor: TensorRef | None) -> TensorDef:
        """The tensor by id or def. Takes a node's slot (``node.inputs[i]``, `int | None`) directly:
        an empty slot raises `GraphError`, so a caller that knows the slot is set need not unwrap it."""
        return self._tensors[self._require(tensor, "tensor()")]

    def tensor_by_name(self, name: str) -> TensorDef | None:
        return next((t for t in self._tensors.values() if t.name == name), None)

    @property
    def nodes(self) -> list[IrNode]:
        """Snapshot of the nodes in their (topological) order."""
        return list(self._order())

    @property
    def tensors(self) -> list[TensorDef]:
        return list(self._tensors.values())

    def nodes_of(self, op_type: str, domain: str = "") -> list[IrNode]:
        return [n for n in self._order() if n.op_type == op_type and n.domain == domain]

    def order_key(self, node: IrNode) -> float:
        """A number that orders nodes as the graph does (`a` before `b` iff its key is smaller). Kept up
        to date by every insertion in O(1), so comparing positions never walks the graph."""
        return self._keys[node.id]

    def node_after(self, node: IrNode) -> IrNode | None:
        """The next node in graph order (None after the last)."""
        nid = self._next[node.id]
        return None if nid is None else self._nodes[nid]

    def tensor_producer(self, tensor: TensorRef | None) -> IrNode | None:
        """The node that writes `tensor`; None for a graph input, an initializer or an empty slot."""
        tid = self._tid(tensor)
        node_id = None if tid is None else self._producer.get(tid)
        return None if node_id is None else self._nodes[node_id]

    def tensor_consumers(self, tensor: TensorRef | None) -> list[tuple[IrNode, int]]:
        """Snapshot of (node, input index) uses, safe to iterate while rewiring."""
        return [(self._nodes[n], i) for n, i in self._consumers[self._require(tensor, "tensor_consumers()")]]

    def is_graph_output(self, tensor: TensorRef | None) -> bool:
        """False for None, so callers can ask about an optional slot (``node.outputs[i]``) directly."""
        return self._tid(tensor) in self.outputs

    def __iter__(self) -> Iterator[IrNode]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    # ----- internals ---------------------------------------------------------------------
    @overload
    @staticmethod
    def _tid(tensor: TensorRef) -> int: ...
    @overload
    @staticmethod
    def _tid(tensor: TensorRef | None) -> int | None: ...
    @staticmethod
    def _tid(tensor: TensorRef | None) -> int | None:
        return tensor.id if isinstance(tensor, TensorDef) else tensor

    def _require(self, tensor: TensorRef | None, where: str) -> int:
        """`tensor`'s id; an empty slot (None) is a caller bug, named here rather than as a KeyError."""
        if tensor is None:
            raise GraphError(f"graph '{self.name}': {where} got None (an empty optional slot), expected a tensor")
        return self._tid(tensor)

    def _link(self, node: IrNode) -> None:
        for i, t in enumerate(node.inputs):
            if t is not None:
                if t not in self._tensors:
                    raise GraphError(f"node '{node.name}' input {i} refers to unknown tensor {t}")
                self._consumers[t].append((node.id, i))
        for t in node.outputs:
            if t is not None:
                self._producer[t] = node.id

    def _order(self) -> list[IrNode]:
        if self._ordered is None:
            ordered, nid = [], self._head
            while nid is not None:
                ordered.append(self._nodes[nid])
                nid = self._next[nid]
            self._ordered = ordered
        return self._ordered

    def _place(self, nid: int, before: int | None) -> None:
        """Link `nid` into graph order before `before` (at the end for None)."""
        prev = self._tail if before is None else self._prev[before]
        self._prev[nid], self._next[nid] = prev, before
        if prev is None:
            self._head = nid
        else:
            self._next[prev] = nid
        if before is None:
            self._tail = nid
        else:
            self._prev[before] = nid
        low = self._keys[prev] if prev is not None else None
        high = self._keys[before] if before is not None else None
        if low is None or high is None:
            self._keys[nid] = (high - 1.0) if low is None and high is not None else (0.0 if low is None else low + 1.0)
        elif high - low > 1e-6:
            self._keys[nid] = (low + high) / 2
        else:
            self._renumber()
        self._ordered = None

    def _renumber(self) -> None:
        """Spread the order keys out again (after some fifty insertions between the same two nodes)."""
        nid, k = self._head, 0.0
        while nid is not None:
            self._keys[nid] = k
            nid, k = self._next[nid], k + 1.0

    def _unplace(self, nid: int) -> None:
        prev, after = self._prev.pop(nid), self._next.pop(nid)
        if prev is None:
            self._head = after
        else:
            self._next[prev] = after
        if after is None:
            self._tail = prev
        else:
            self._prev[after] = prev
        del self._keys[nid]
        self._ordered = None
