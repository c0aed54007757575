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
structure (an axis, steps, pads) cannot take a symbol: the plan is made for the value instead
(`compiler.deferred`): with the value among the compile dims it is baked in as a constant, without
it the pass raises `ValuesNeeded` and the pipeline returns a deferred plan.
Only the default ONNX domain is read: the tables name ONNX ops.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from onyxia.compiler.deferred import ValuesNeeded
from onyxia.core import DataType, IrGraph, OperatorRegistry, Stage, Static, SymbolicExpr, TensorDef
from onyxia.core.plan_values import UNSPECIALIZED, specialized_value
from onyxia.core.value_slots import STRUCTURAL_SLOTS, VALUE_SLOTS, passes_value, slot_role

__all__ = ["MAX_VALUE_ELEMENTS", "MarkValueInputsPass", "value_symbol_names"]

log = logging.getLogger(__name__)

MAX_VALUE_ELEMENTS = 64
"""Largest graph input whose elements become symbols (a shape or a list of bounds, never data)."""

_INTEGERS = (DataType.INT64, DataType.INT32)
_FLOATS = (DataType.FLOAT, DataType.FLOAT16)


class MarkValueInputsPass:
    name = "MarkValueInputs"
    stage = Stage.RESOLUTION

    def __init__(self, dims: Mapping[str, int] | None = None) -> None:
        self.dims = dict(dims or {})  # the compile dims: a structural input's values, when planned for them

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        marked, needed, reasons = 0, {}, []
        for tid in graph.inputs:
            tensor = graph.tensor(tid)
            if tensor.value is not None:
                continue
            shape = tensor.shape
            if not isinstance(shape, Static) or not (_candidate(tensor) or _empty(tensor)):
                continue
            sized, structural, escapes = _slots_reached(graph, tid)
            if _empty(tensor) and (sized or structural):  # no element: the value is known from the shape
                tensor.value = np.zeros(shape.dims, dtype=tensor.dtype.numpy)
                marked += 1
                continue
            if escapes or tensor.dtype in _FLOATS:  # slots reached through ops that fold no symbol
                structural = structural or _slots_beyond(graph, tid)
            if structural:  # planned for its value: baked in when the dims give it, else wait for it
                names = [str(s) for s in _symbols(tensor).flat]
                if all(self.dims.get(n, UNSPECIALIZED) != UNSPECIALIZED for n in names):
                    tensor.value = _specialized(tensor, [self.dims[n] for n in names])
                    marked += 1
                    continue
                needed.update({n: (tid, i) for i, n in enumerate(names)})
                (node, op_type, index), what = structural[0]
                reasons.append(f"node '{node}' ({op_type}) input {index} ({what}) from graph input '{tensor.name}'")
            elif sized and not escapes:  # a symbol must never meet an op that cannot fold it
                tensor.value = _symbols(tensor)
                marked += 1
        if needed:
            raise ValuesNeeded(
                f"planning needs run-time values at compile time, where they set a kernel's structure: "
                f"{'; '.join(reasons)}; the plan is made when run() gives them",
                needed,
            )
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


def _empty(tensor: TensorDef) -> bool:
    shape = tensor.shape
    return isinstance(shape, Static) and 0 in shape.dims and tensor.dtype in (*_INTEGERS, *_FLOATS)


def _candidate(tensor: TensorDef) -> bool:
    shape = tensor.shape
    if (
        tensor.dtype not in (*_INTEGERS, *_FLOATS, DataType.BOOL)
        or not isinstance(shape, Static)
        or len(shape.dims) > 1
    ):
        return False
    return 0 < int(np.prod(shape.dims, dtype=np.int64)) <= MAX_VALUE_ELEMENTS


def _specialized(tensor: TensorDef, dims: list[int]) -> np.ndarray:
    """The values a specialized plan is compiled for, from their compiled dims."""
    assert isinstance(tensor.shape, Static)
    dtype = tensor.dtype.numpy
    return np.array([specialized_value(d, dtype) for d in dims], dtype=dtype).reshape(tensor.shape.dims)


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


def _slots_beyond(graph: IrGraph, start: int) -> list[_Slot]:
    """Slots `start`'s value reaches through any default-domain ops (a center crop's pads computed from
    a graph input, a window length cast to float): symbols cannot get through those ops, so the plan
    is made for the input's value, which folds them."""
    found: list[_Slot] = []
    seen, frontier = {start}, [start]
    while frontier and not found:
        for node, index in graph.tensor_consumers(frontier.pop()):
            if slot_role(graph, node, index) is not None:
                slot = (node.op_type, index)
                found.append(
                    ((node.name, node.op_type, index), {**VALUE_SLOTS, **STRUCTURAL_SLOTS}.get(slot, "a bound"))
                )
            elif node.domain in ("", "ai.onnx"):
                fresh = [t for t in node.outputs if t is not None and t not in seen]
                seen.update(fresh)
                frontier.extend(fresh)
    return found
