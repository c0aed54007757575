"""Plans that wait for a value: a graph input that sets a kernel's structure (a Reduce axis, Slice
steps, Pad pads) is known only at run time, so the first compile cannot plan the kernels.

`MarkValueInputsPass` raises `ValuesNeeded` when such an input's elements are not among the compile
dims; the pipeline then returns `deferred_plan`: the model's inputs and outputs, no steps, and the
input's symbols as compiled dims set to `UNSPECIALIZED`. At its first `run()` the runtime binds the
symbols from the host array (as ``value + SPECIALIZED_OFFSET``); a compiled dim that moves makes the
executor switch to the plan its replanner compiles for the new dims, in which the pass bakes the
values in as constants. Each value's plan is cached (`runtime/variants.py`), so going back to a
value seen before compiles nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from onyxia.core import CompiledModel, DataType, IrGraph, OnyxiaError, PlanTensor, TensorRole, require_gpu_type
from onyxia.core.plan_values import UNSPECIALIZED, ValueSymbol
from onyxia.core.shapes import Absent

__all__ = ["ValuesNeeded", "deferred_plan"]


class ValuesNeeded(OnyxiaError):
    """Compiling needs the values of graph-input elements `symbols` (name -> (tensor id, element))."""

    def __init__(self, message: str, symbols: Mapping[str, tuple[int, int]]) -> None:
        super().__init__(message)
        self.symbols = dict(symbols)


def deferred_plan(graph: IrGraph, dims: Mapping[str, int], needed: ValuesNeeded) -> CompiledModel:
    """The plan of a model whose kernels wait for `needed`: inputs and outputs, no steps."""
    tensors: dict[int, PlanTensor] = {}
    for tid in graph.inputs:
        t = graph.tensor(tid)
        require_gpu_type(t.dtype, f"input '{t.name}'")  # refused now, as the plan for the values would
        shape = () if isinstance(t.shape, Absent) else tuple(t.shape.dims)
        tensors[tid] = PlanTensor(tid, t.name, t.dtype, shape, TensorRole.INPUT)
    for tid in graph.outputs:  # placeholders: no run reads them before the plan for the values replaces this one
        t = graph.tensor(tid)
        if t.dtype is not DataType.UNDEFINED:
            require_gpu_type(t.dtype, f"output '{t.name}'")
        tensors.setdefault(tid, PlanTensor(tid, t.name, DataType.FLOAT, (), TensorRole.OUTPUT))
    plan = CompiledModel([], [], tensors, list(graph.inputs), list(graph.outputs), [])
    plan.dims = {**dims, **{name: UNSPECIALIZED for name in needed.symbols}}
    plan.value_symbols = [ValueSymbol(tid, index, name) for name, (tid, index) in needed.symbols.items()]
    plan.metadata = {"graph": graph.name, "deferred": str(needed)}
    return plan
