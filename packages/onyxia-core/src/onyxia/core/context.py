"""Context objects handed to operators: one node's view of the graph plus the shared helpers.

Every operator would otherwise re-derive attribute defaults, axis normalisation, broadcasting and
error messages; these helpers do it once, and every error they raise names the node, the op and
the input shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import ShapeInferenceError
from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode, TensorDef
from onyxia.core.nibbles import host_values
from onyxia.core.shapes import Absent, Static, Symbolic, TensorShape, shape_of
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr

__all__ = [
    "FOLD_ELEMENT_LIMIT",
    "WEIGHT_FOLD_ELEMENT_LIMIT",
    "DimConstraint",
    "FoldCtx",
    "InferenceCtx",
    "NodeCtx",
    "as_output_value",
    "is_symbolic_value",
]

FOLD_ELEMENT_LIMIT = 1 << 20
"""Largest tensor (elements) read or produced by host-side folding; bigger stays on the GPU."""

WEIGHT_FOLD_ELEMENT_LIMIT = 1 << 24
"""Largest tensor (elements) a fold of weights alone reads or produces (a FoldCtx with `weights_only`): work
that depends on no graph input is done once at compile time, as onnxruntime folds its initializers, instead of
on every run (a dequantized LSTM's weights, a QDQ model's DequantizeLinear of a [768, 3072] weight)."""

DimConstraint = tuple[SymbolicDim, SymbolicDim, str]
"""Two dims a shape rule assumed equal, and where; checked when dims are bound at run time."""


class NodeCtx:
    """Inputs, attributes and error helpers shared by all three contexts."""

    def __init__(self, graph: IrGraph, node: IrNode) -> None:
        self.graph = graph
        self.node = node
        self.constraints: list[DimConstraint] = graph.constraints

    # ----- inputs --------------------------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return len(self.node.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.node.outputs)

    def has_input(self, i: int) -> bool:
        return i < len(self.node.inputs) and self.node.inputs[i] is not None

    def has_output(self, i: int) -> bool:
        return i < len(self.node.outputs) and self.node.outputs[i] is not None

    def input_tensor(self, i: int) -> TensorDef:
        if not self.has_input(i):
            raise self.error(f"input {i} is required but absent")
        return self.graph.tensor(self.node.inputs[i])

    def output_tensor(self, i: int) -> TensorDef:
        return self.graph.tensor(self.node.outputs[i])

    def input_shape(self, i: int) -> TensorShape:
        return self.input_tensor(i).shape if self.has_input(i) else Absent()

    def input_dims(self, i: int) -> tuple[SymbolicDim, ...]:
        shape = self.input_shape(i)
        if isinstance(shape, Absent):
            raise self.error(f"input {i} is required but absent")
        return shape.dims

    def input_dtype(self, i: int) -> DataType:
        return self.input_tensor(i).dtype

    def input_rank(self, i: int) -> int:
        return len(self.input_dims(i))

    def require_static(self, i: int) -> tuple[int, ...]:
        shape = self.input_shape(i)
        if not isinstance(shape, Static):
            raise self.error(f"input {i} must have a static shape, found {shape}")
        return shape.dims

    def mark_static_required(self, dims: Sequence[SymbolicDim], why: str) -> None:
        """Record that the symbols of `dims` decide a structure this node's rule had to pick at compile time
        (an axes-less Squeeze keeps a dim that run time may make 1, and 1 would drop it): the plan is right
        only where they are static (`CompiledModel.static_required`; the runtime refuses a plan leaving one open)."""
        names = sorted({n for d in dims if isinstance(d, SymbolicExpr) for n in d.names()})
        entry = self.graph.static_required.setdefault(self.node.id, {})
        for name in names:
            entry.setdefault(name, f"node '{self.node.name}' ({self.node.op_type}): {why}")

    initializer_limit = FOLD_ELEMENT_LIMIT  # the largest initializer `input_value` reads into host memory

    def input_value(self, i: int) -> np.ndarray | None:
        """The compile-time value of input `i` (folded, Constant, or an initializer within `initializer_limit`)."""
        if not self.has_input(i):
            return None
        tensor = self.input_tensor(i)
        if (
            tensor.value is None
            and tensor.initializer is not None
            and tensor.initializer.numel <= self.initializer_limit
        ):
            tensor.value = host_values(tensor.dtype, tensor.initializer.dims, tensor.initializer.numpy())
        return tensor.value

    def require_value(self, i: int, what: str) -> np.ndarray:
        value = self.input_value(i)
        if value is None:
            raise self.error(f"input {i} ({what}) must be known at compile time (a constant or foldable)")
        return value

    # ----- attributes ----------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        return self.node.attributes.get(name, default)

    def attr_int(self, name: str, default: int | None = None) -> int:
        return int(self._attr(name, default))

    def attr_float(self, name: str, default: float | None = None) -> float:
        return float(self._attr(name, default))

    def attr_ints(self, name: str, default: Sequence[int] | None = None) -> list[int]:
        return [int(v) for v in self._attr(name, default)]

    def attr_str(self, name: str, default: str | None = None) -> str:
        value = self._attr(name, default)
        return value.decode() if isinstance(value, bytes) else str(value)

    def _attr(self, name: str, default: Any) -> Any:
        value = self.node.attributes.get(name, default)
        if value is None:
            raise self.error(f"required attribute '{name}' is missing")
        return value

    # ----- shape helpers -------------------------------------------------------------------
    def normalize_axis(self, axis: int, rank: int) -> int:
        if not -rank <= axis < max(rank, 1):
            raise self.error(f"axis {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis

    def normalize_axes(self, axes: Sequence[int], rank: int) -> list[int]:
        result = [self.normalize_axis(int(a), rank) for a in axes]
        if len(set(result)) != len(result):
            raise self.error(f"axes {list(axes)} repeat an axis")
        return result

    def broadcast(self, *dims_list: Sequence[SymbolicDim]) -> Static | Symbolic:
        """numpy-style multidirectional broadcasting of several shapes."""
        rank = max((len(d) for d in dims_list), default=0)
        result: list[SymbolicDim] = []
        for axis in range(rank):
            current: SymbolicDim = 1
            for dims in dims_list:
                offset = axis - (rank - len(dims))
                if offset >= 0:
                    current = self._broadcast_dim(current, dims[offset])
            result.append(current)
        return shape_of(result)

    def _broadcast_dim(self, a: SymbolicDim, b: SymbolicDim) -> SymbolicDim:
        if a == b or b == 1:
            return a
        if a == 1:
            return b
        if isinstance(a, int) and isinstance(b, int):
            raise self.error(f"cannot broadcast dims {a} and {b}")
        # A symbolic dim facing another dim is assumed to match it (it is never 1 at run time in
        # the exporters' graphs); the runtime checks the assumption once dims are bound.
        self.constraints.append((a, b, f"node '{self.node.name}' ({self.node.op_type}) broadcasting"))
        return b if isinstance(b, int) else a

    # ----- errors --------------------------------------------------------------------------
    def describe_inputs(self) -> str:
        parts = []
        for i, t in enumerate(self.node.inputs):
            if t is None:
                parts.append(f"{i}: absent")
            else:
                tensor = self.graph.tensor(t)
                parts.append(f"{i}: {tensor.dtype.short}{tensor.shape}")
        return "; ".join(parts) or "none"

    def error(self, message: str) -> ShapeInferenceError:
        node = self.node
        domain = node.domain or "ai.onnx"
        return ShapeInferenceError(
            f"node '{node.name}' ({node.op_type}, domain {domain}): {message} [inputs {self.describe_inputs()}]"
        )


class InferenceCtx(NodeCtx):
    """What `infer_output_shapes` sees."""


class FoldCtx(NodeCtx):
    """What `try_fold` sees; outputs already carry their inferred dtype and shape. `weights_only`: every input
    is an initializer or a folded value, so initializers up to `WEIGHT_FOLD_ELEMENT_LIMIT` are read."""

    def __init__(self, graph: IrGraph, node: IrNode, *, weights_only: bool = False) -> None:
        super().__init__(graph, node)
        if weights_only:
            self.initializer_limit = WEIGHT_FOLD_ELEMENT_LIMIT

    def all_inputs_have_values(self) -> bool:
        return all(self.input_value(i) is not None for i in range(self.num_inputs) if self.has_input(i))

    def values(self) -> list[np.ndarray | None]:
        return [self.input_value(i) for i in range(self.num_inputs)]

    def known_values(self) -> list[np.ndarray] | None:
        """Every input slot's value, or None when one is unknown or absent: a fold whose inputs are all
        required gets its guard and typed operands in one call instead of `values()` plus a check."""
        values = self.values()
        known = [v for v in values if v is not None]
        return known if len(known) == len(values) else None

    def output_numpy_dtype(self, i: int = 0) -> np.dtype:
        return self.output_tensor(i).dtype.numpy

    def require_static_output(self, i: int = 0) -> tuple[int, ...]:
        """Output `i`'s dims, to reshape a folded result into: FoldConstants skips symbolic outputs."""
        shape = self.output_tensor(i).shape
        if not isinstance(shape, Static):
            raise self.error(f"output {i} must have a static shape to fold, found {shape}")
        return shape.dims

    def unary_fold(self, fn: Callable[[np.ndarray], np.ndarray]) -> list[np.ndarray] | None:
        if not self.all_inputs_have_values():
            return None
        return [as_output_value(fn(self.require_value(0, "operand")), self.output_numpy_dtype())]

    def binary_fold(self, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> list[np.ndarray] | None:
        if not self.all_inputs_have_values():
            return None
        a, b = self.require_value(0, "left operand"), self.require_value(1, "right operand")
        with np.errstate(all="ignore"):
            result = fn(a, b)
        return [as_output_value(result, self.output_numpy_dtype())]


def is_symbolic_value(value: np.ndarray | None) -> bool:
    """A folded value holding `SymbolicExpr`s (shape arithmetic on symbolic dims)."""
    return value is not None and value.dtype == object


def as_output_value(result: object, dtype: np.dtype) -> np.ndarray:
    """`result` as the output dtype; symbolic elements keep an object array until all are ints.

    Shape arithmetic on symbolic dims (``Shape -> Gather -> Mul``) folds through numpy object
    arrays of ints and `SymbolicExpr`s, so Reshape still learns its target shape at compile time.
    """
    array = np.asarray(result)
    if array.dtype == object:
        if all(isinstance(v, (int, np.integer)) for v in array.flat):
            return array.astype(dtype)
        return array
    return array.astype(dtype, copy=False)
