"""Dims a session compiles per value: which ones, the plan that waits for them, and its variants' cache.

A session compiles with the model's symbolic dims open, so one plan serves every shape (an image's H and W too:
the conv kernels take them as immediates at the speed of a static plan). Three things make a dim compile per
value instead, each found at compile time:

- the open compile fails (`open_dims` of the graph's inputs all wait: no shape could be planned without
  numbers, e.g. a Resize by a scale whose product with a symbolic size is inexact);
- it succeeds, but a shape rule had to pick a structure that depends on a dim's value
  (`CompiledModel.static_required`: an axes-less Squeeze keeps a symbolic dim that onnxruntime drops where it
  is 1, so the output's rank depends on it). The runtime refuses the open plan; only those dims wait (PLCMOS's batch_size: a batch of 1 gives onnxruntime's 0-d score). A dim
  bound from an input's values (a Reshape target fed at run time) cannot wait so: the compile does not bake
  values that size no kernel, so the runtime refuses that plan at load, naming the node;
- it waits for input values (`onyxia.compiler.deferred`: silero VAD's sample rate picks an If branch): the
  plan at those values was never tried with the dims open, and it can fail there (the same model's
  ``If(Shape(x)[0] == 1, Squeeze, Identity)`` gives branches of different ranks on a symbolic batch), so the
  open input dims wait with the values. A model run at one shape (a VAD's fixed chunk) compiles once.

The waiting plan (`per_shape_plan`) has no steps; its waiting dims are compiled dims set to
`UNSPECIALIZED`, so the first run's shapes move them and the executor asks the replanner for the plan at
those values, keeping each variant for reuse (`runtime/variants.py`). `VariantReplanner` is that replanner:
each variant goes through the compiled-plan cache under its dims, so a new process running a shape an earlier
one ran loads the variant without parsing or compiling; the graph is parsed only on a cache miss.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from onyxia.core import CompiledModel, DataType, IrGraph, PlanTensor, TensorRole, require_gpu_type
from onyxia.core.plan import Replanner
from onyxia.core.plan_values import UNSPECIALIZED
from onyxia.core.shapes import Absent
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.runtime import Runtime, compiling_for

if TYPE_CHECKING:
    from onyxia.cli.plan_cache import PlanKey

__all__ = ["VariantReplanner", "open_dims", "per_shape_plan", "required_static"]

PER_SHAPE = "per_shape"  # the plan metadata key saying why (and that) dims compile per value


def open_dims(graph: IrGraph, fixed: Mapping[str, int]) -> set[str]:
    """The named dims of the graph's inputs that `fixed` leaves open."""
    names: set[str] = set()
    for tid in graph.inputs:
        shape = graph.tensor(tid).shape
        if not isinstance(shape, Absent):
            names |= {str(d) for d in shape.dims if isinstance(d, SymbolicExpr) and d.is_name}
    return names - fixed.keys()


def required_static(plan: CompiledModel, graph: IrGraph, fixed: Mapping[str, int]) -> dict[str, str]:
    """The open input dims `plan` needs static (`static_required`), with the reason."""
    waiting = open_dims(graph, fixed)
    return {name: why for name, why in sorted(plan.static_required.items()) if name in waiting}


def per_shape_plan(graph: IrGraph, fixed: Mapping[str, int], waiting: Mapping[str, str]) -> CompiledModel:
    """A plan with no steps whose `waiting` dims (name -> why) are compiled dims not yet specialized."""
    tensors: dict[int, PlanTensor] = {}
    for tid in graph.inputs:
        t = graph.tensor(tid)
        require_gpu_type(t.dtype, f"input '{t.name}'")
        shape = () if isinstance(t.shape, Absent) else tuple(t.shape.dims)
        tensors[tid] = PlanTensor(tid, t.name, t.dtype, shape, TensorRole.INPUT)
    for tid in graph.outputs:  # placeholders: the first run switches to the plan for its shapes
        t = graph.tensor(tid)
        tensors.setdefault(tid, PlanTensor(tid, t.name, DataType.FLOAT, (), TensorRole.OUTPUT))
    plan = CompiledModel([], [], tensors, list(graph.inputs), list(graph.outputs), [])
    plan.dims = {**fixed, **dict.fromkeys(sorted(waiting), UNSPECIALIZED)}
    reasons = "; ".join(f"{name}: {why}" for name, why in sorted(waiting.items()))
    plan.metadata = {"graph": graph.name, PER_SHAPE: f"compiled per value of {sorted(waiting)} ({reasons})"}
    return plan


VariantKey = Callable[[Mapping[str, int]], "PlanKey"]  # dims -> the plan cache key of that variant


class VariantReplanner:
    """The per-shape plan's replanner: a variant from the plan cache, else compiled from the graph
    (`make_inner`, called once and only on a miss) inside `compiling_for(runtime)`, then stored."""

    def __init__(
        self,
        input_dims: Mapping[str, tuple[SymbolicDim, ...]],
        make_inner: Callable[[], Replanner],
        runtime: Runtime,
        variant_key: VariantKey | None,
        data_dir: Path | None,
    ) -> None:
        self.input_dims: dict[str, tuple[SymbolicDim, ...]] = dict(input_dims)
        self._make_inner, self._runtime, self._key, self._data_dir = make_inner, runtime, variant_key, data_dir
        self._inner: Replanner | None = None
        self._lock = threading.Lock()

    def _compile(self, dims: Mapping[str, int]) -> CompiledModel:
        with self._lock:
            if self._inner is None:
                self._inner = self._make_inner()
        return self._inner.replan(dims)

    def replan(self, dims: Mapping[str, int]) -> CompiledModel:
        from onyxia.cli.plan_cache import cache_enabled, cached_build

        with compiling_for(self._runtime):
            if self._key is None or not cache_enabled():
                return self._compile(dims)
            key = self._key(dims)
            plan, _, _ = cached_build(
                key,
                lambda: (self._compile(dims), None),
                data_dir=self._data_dir,
                rebuild=lambda: self._compile(dims),
            )
            return plan
