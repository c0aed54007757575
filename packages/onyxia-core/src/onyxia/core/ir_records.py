"""The records a graph holds: `TensorDef` (ir-py's Value role), `IrNode`, and the error its edits raise.

These are plain data with no links to each other except by id, which is what lets a pass hold them
across edits. Who produces or consumes a tensor is the graph's business (`onyxia.core.ir_store`), so a
record can never disagree with the graph about it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import OnyxiaError
from onyxia.core.shapes import Absent, TensorShape
from onyxia.core.symbolic import SymbolicDim
from onyxia.core.values import TensorValue

__all__ = ["GraphError", "IrNode", "TensorDef", "TensorKind", "TensorRef"]


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

    @property
    def dims(self) -> tuple[SymbolicDim, ...]:
        """The shape's dims; an omitted (`Absent`) tensor has none, which a caller asking is a bug."""
        if isinstance(self.shape, Absent):
            raise GraphError(f"tensor '{self.name}' (%{self.id}) is absent: it has no dims (expected a shaped tensor)")
        return self.shape.dims

    def __str__(self) -> str:
        return f"%{self.id}:{self.dtype.short}{self.shape}"


# Graph methods take a tensor by id or by its TensorDef, so callers need not unwrap either way.
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
