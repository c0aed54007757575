"""Give graph inputs that size something a symbolic value, so one plan serves every value given.

Exporters freeze Reshape targets, Expand shapes or Slice bounds into initializers, but ONNX lets
them be graph inputs (onnx's backend test runner feeds every input at run time). Such an input is
small (a few int64 elements) and the data it carries decides output dims, so this pass makes each
element a fresh dim symbol (``shape[2]`` for element 2 of input ``shape``): shape inference and
folding then carry the symbols exactly as they carry ``Shape -> Gather`` values, symbolic dims
become immediates, and the runtime binds the symbols from the host array given to `run()` like it
binds ``sequence_length`` from an input's shape: no readback and no recompilation. The input stays
an input (a kernel that reads it still gets the data uploaded).

An input is marked when it has a small static integer shape and reaches, directly or through shape
arithmetic that folds symbolic values, an input slot that sizes an output (`onyxia.core.value_slots`),
and nothing else: a value that also meets an op that cannot fold symbols stays unmarked (then
`InsertValueReadbacksPass` reads what it sizes back from the GPU). A slot whose value sets a kernel's
structure (an axis, steps, pads) cannot take a symbol: reaching one is a compile error naming the
node, the input and the graph input.
Only the default ONNX domain is read: the tables name ONNX ops.
"""

from __future__ import annotations

import logging

import numpy as np

from onyxia.core import DataType, IrGraph, OperatorRegistry, ShapeInferenceError, Stage, Static, SymbolicExpr, TensorDef
from onyxia.core.value_slots import STRUCTURAL_SLOTS, VALUE_SLOTS, passes_value, slot_role

__all__ = ["MAX_VALUE_ELEMENTS", "MarkValueInputsPass", "value_symbol_names"]

log = logging.getLogger(__name__)

MAX_VALUE_ELEMENTS = 64
"""Largest graph input whose elements become symbols (a shape or a list of bounds, never data)."""

_INTEGERS = (DataType.INT64, DataType.INT32)


class MarkValueInputsPass:
    name = "MarkValueInputs"
    stage = Stage.RESOLUTION

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        marked = 0
        for tid in graph.inputs:
            tensor = graph.tensor(tid)
            if tensor.value is not None or not _candidate(tensor):
                continue
            sized, structural, escapes = _slots_reached(graph, tid)
            if structural:
                (node, op_type, index), what = structural[0]
                raise ShapeInferenceError(
                    f"node '{node}' ({op_type}): input {index} ({what}) comes from graph input '{tensor.name}', known only at run "
                    f"time; Onyxia needs {what} at compile time because it sets the kernel's structure, not a size: "
                    "give it as an initializer or a Constant"
                )
            if sized and not escapes:  # a symbol must never meet an op that cannot fold it
                tensor.value = _symbols(tensor)
                marked += 1
        log.info("%s: %d graph inputs bound as dim values", self.name, marked)
        return marked > 0


def value_symbol_names(graph: IrGraph) -> dict[str, tuple[int, int]]:
    """Each value symbol of the graph's marked inputs -> (input tensor id, flat element index)."""
    names: dict[str, tuple[int, int]] = {}
    for tid in graph.inputs:
        value = graph.tensor(tid).value
        if value is None or value.dtype != object:
            continue
        for index, element in enumerate(value.flat):
            if isinstance(element, SymbolicExpr) and element.is_name:
                names[str(element)] = (tid, index)
    return names


def _candidate(tensor: TensorDef) -> bool:
    shape = tensor.shape
    if tensor.dtype not in _INTEGERS or not isinstance(shape, Static) or len(shape.dims) > 1:
        return False
    return 0 < int(np.prod(shape.dims, dtype=np.int64)) <= MAX_VALUE_ELEMENTS


def _symbols(tensor: TensorDef) -> np.ndarray:
    assert isinstance(tensor.shape, Static)
    dims = tensor.shape.dims
    count = int(np.prod(dims, dtype=np.int64))
    names = [SymbolicExpr.name(f"{tensor.name}[{i}]") for i in range(count)]
    array = np.empty(count, dtype=object)
    array[:] = names
    return array.reshape(dims)


_Slot = tuple[tuple[str, str, int], str]  # ((node name, op type, input index), what the input is)


def _slots_reached(graph: IrGraph, start: int) -> tuple[list[_Slot], list[_Slot], bool]:
    """(sizing slots, structural slots, whether the value also reaches any other consumer) that
    `start`'s value reaches through ops that fold symbolic values (`passes_value`)."""
    sized: list[_Slot] = []
    structural: list[_Slot] = []
    escapes = False
    seen, frontier = {start}, [start]
    while frontier:
        tid = frontier.pop()
        for node, index in graph.tensor_consumers(tid):
            role, where = slot_role(graph, node, index), (node.name, node.op_type, index)
            if role == "value":
                sized.append((where, VALUE_SLOTS[(node.op_type, index)]))
            elif role == "structural":
                structural.append((where, STRUCTURAL_SLOTS.get((node.op_type, index), "a bound over run-time steps")))
            elif node.domain in ("", "ai.onnx") and passes_value(node.op_type, index):
                for out in node.outputs:
                    if out is not None and out not in seen:
                        seen.add(out)
                        frontier.append(out)
            else:
                escapes = True
    return sized, structural, escapes
