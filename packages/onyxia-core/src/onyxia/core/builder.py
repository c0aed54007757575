"""`GraphBuilder`: three lines to a test graph or a rewrite's replacement nodes.

    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, ["batch", 4])
    b.output(b.op("Add", x, b.constant(np.ones(4, np.float32))))

Outputs of `op` start with dtype UNDEFINED and an Absent shape; `ShapeInferencePass` fills them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, overload

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode, TensorDef, TensorKind
from onyxia.core.shapes import Absent, shape_of
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.core.values import TensorValue

__all__ = ["GraphBuilder", "parse_dims"]


def parse_dims(dims: Sequence[int | str | SymbolicExpr]) -> list[SymbolicDim]:
    """Dims as ints, `SymbolicExpr`s or dim strings (parsed)."""
    return [SymbolicExpr.parse(d) if isinstance(d, str) else d for d in dims]


class GraphBuilder:
    def __init__(self, name: str = "graph", opsets: dict[str, int] | None = None, graph: IrGraph | None = None) -> None:
        self.graph = graph if graph is not None else IrGraph(name)
        if graph is None:
            self.graph.opset_imports.update(opsets or {"": 21, "com.microsoft": 1})
        self.before: IrNode | None = None

    def input(self, name: str, dtype: DataType, dims: Sequence[int | str | SymbolicExpr]) -> TensorDef:
        return self.graph.add_tensor(name, dtype, shape_of(parse_dims(dims)), TensorKind.INPUT)

    def initializer(self, name: str, array: np.ndarray) -> TensorDef:
        array = np.asarray(array)
        value = TensorValue.from_numpy(array, name)
        return self.graph.add_tensor(
            name, value.dtype, shape_of(array.shape), TensorKind.INITIALIZER, initializer=value
        )

    def constant(self, array: np.ndarray | float | int, name: str = "const") -> TensorDef:
        """A `Constant` node's output (so folding, not the loader, gives it its value)."""
        value = TensorValue.from_numpy(np.asarray(array), name)
        return self.op("Constant", value=value, _name=name)

    @overload
    def op(
        self,
        op_type: str,
        *inputs: TensorDef | None,
        _outputs: Literal[1] = 1,
        _domain: str = "",
        _name: str | None = None,
        **attrs: Any,
    ) -> TensorDef: ...
    @overload
    def op(
        self,
        op_type: str,
        *inputs: TensorDef | None,
        _outputs: int,
        _domain: str = "",
        _name: str | None = None,
        **attrs: Any,
    ) -> tuple[TensorDef, ...]: ...
    def op(
        self,
        op_type: str,
        *inputs: TensorDef | None,
        _outputs: int = 1,
        _domain: str = "",
        _name: str | None = None,
        **attrs: Any,
    ) -> TensorDef | tuple[TensorDef, ...]:
        """Add a node; returns its output TensorDef, or a tuple when `_outputs` > 1."""
        outs = [
            self.graph.add_tensor(f"{_name or op_type}_out{i}", DataType.UNDEFINED, Absent()) for i in range(_outputs)
        ]
        self.graph.add_node(op_type, list(inputs), outs, attrs, domain=_domain, name=_name, before=self.before)
        return outs[0] if _outputs == 1 else tuple(outs)

    def output(self, *tensors: TensorDef) -> None:
        for t in tensors:
            self.graph.mark_output(t)
