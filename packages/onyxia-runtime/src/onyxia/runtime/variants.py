"""Compiled dims that change: one plan variant per set of compiled dims, switched between, never rejected late.

A dim the caller fixed at compile time (`CompiledModel.dims`) is baked into shader defs, buffer
sizes and folded values, so moving it needs a new plan, not new immediates. The compiler attaches
a `Replanner` to every plan it returns; `PlanVariants` asks it for the plan at the new dims once
and keeps every variant by its dims, so moving back costs no compile. The executor then loads the
variant: pipelines come from its cache keyed by WGSL source (only the shaders whose defs used the
dim are new), and `adopt_buffers` keeps each GPU buffer that still serves the same tensor (weights
only when their data is the same), so only new or grown buffers are allocated and only changed
weights uploaded. A plan built by hand has no replanner: a change of one of its compiled dims is
refused where it is asked for, naming the dim, never accepted and then failing in `run()`.

A plan marked `REPLAN_ASSUMPTIONS` (onyxia.ort marks its open plans) re-plans where run-time dims break
an equality its shape rules assumed (`BrokenAssumption`: ``x[a, 4] + y[b, 4]`` assumes ``a == b``, and
onnxruntime broadcasts ``a = 1`` against ``b = 3``): the dims of that constraint become compiled dims at
their values, a variant like any other, and a later run whose dims satisfy the open plan goes back to it.
The check stays where it is (the layout, once per dims change), so the open plan keeps its speed; only
the run that breaks it pays a compile, once per value. Unmarked plans (the LLM sessions, the CLI) keep
refusing such dims with the `InputError`: there, unequal dims mean the caller fed the wrong tensors.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from onyxia.core.errors import InputError, OnyxiaError, PlanningError
from onyxia.core.plan import BufferRef, CompiledModel, Dispatch, PlanTensor, TensorRole
from onyxia.core.symbolic import SymbolicExpr
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.device import ExecutorStats
from onyxia.runtime.layout import BrokenAssumption, check_constraints
from onyxia.runtime.pipelines import PipelineCache

__all__ = ["REPLAN_ASSUMPTIONS", "PlanVariants", "adopt_buffers", "build_pipelines", "check_static_required"]

REPLAN_ASSUMPTIONS = "replan_broken_assumptions"  # plan metadata key: "yes" where dims breaking one re-plan

DimsKey = tuple[tuple[str, int], ...]


def _key(dims: Mapping[str, int]) -> DimsKey:
    return tuple(sorted(dims.items()))


class PlanVariants:
    """The plan in use (`current`), the variants seen so far by their compiled dims, and the replanner."""

    def __init__(self, compiled: CompiledModel) -> None:
        self.replanner = compiled.replanner
        self._plans: dict[DimsKey, CompiledModel] = {_key(compiled.dims): compiled}
        self.current = self.base = compiled
        self._replan_assumptions = compiled.metadata.get(REPLAN_ASSUMPTIONS) == "yes"
        self._watched: dict[str, tuple[int, tuple[tuple[int, str], ...]]] = {}  # input -> rank, (axis, dim)
        self.select(compiled)

    def select(self, compiled: CompiledModel) -> None:
        """Make `compiled` current: which input axes carry its compiled dims is looked up once here, so
        `moved_by_inputs` costs a few comparisons per run (an LLM's decode step calls it every token)."""
        self.current = compiled
        declared = self.replanner.input_dims if self.replanner is not None else {}
        self._watched = {}
        for name, dims in declared.items():
            axes = tuple(
                (axis, str(d))
                for axis, d in enumerate(dims)
                if isinstance(d, SymbolicExpr) and d.is_name and str(d) in compiled.dims
            )
            if axes:
                self._watched[name] = (len(dims), axes)

    def moved(self, dims: Mapping[str, int]) -> dict[str, int]:
        """The compiled dims of the current plan that `dims` gives other values."""
        compiled = self.current.dims
        return {k: v for k, v in dims.items() if k in compiled and compiled[k] != v}

    def moved_by_inputs(self, inputs: Mapping[str, object]) -> dict[str, int]:
        """The compiled dims the shapes of `inputs` give other values (as the graph declares its
        input axes). Inputs of the wrong rank or type are left to the input checks, which name them."""
        moved: dict[str, int] = {}
        compiled = self.current.dims
        for name, array in inputs.items():  # the run's few inputs, not every input (KV caches stay resident)
            watched = self._watched.get(name)
            shape = getattr(array, "shape", None)
            if watched is None or shape is None or len(shape) != watched[0]:
                continue
            for axis, dim in watched[1]:
                if shape[axis] != compiled[dim]:
                    moved.setdefault(dim, int(shape[axis]))
        return moved

    def for_broken(self, error: BrokenAssumption, stats: ExecutorStats) -> CompiledModel:
        """The variant with the broken constraint's dims compiled at their values (`REPLAN_ASSUMPTIONS`
        plans; `error` is raised again for others, or where those dims are compiled already)."""
        moved = {k: v for k, v in error.dims.items() if k not in self.current.dims}
        if not (self._replan_assumptions and self.replanner is not None and moved):
            raise error
        return self.plan_for(moved, stats, "a run breaking a compile-time assumption")

    def _back_to_base(self, target: Mapping[str, int], dims: Mapping[str, int]) -> bool:
        """Whether `target` (compiled dims) only adds dims to the base plan's that its constraints
        accept at `dims`: then the base plan, open on them, serves the run."""
        base = self.base.dims
        if not self._replan_assumptions or any(target.get(k) != v for k, v in base.items()):
            return False
        try:
            check_constraints(self.base, {**dims, **target})
        except OnyxiaError:  # broken again, or a dim not bound yet: stay on a variant
            return False
        return True

    def plan_for(
        self, moved: Mapping[str, int], stats: ExecutorStats, caller: str, dims: Mapping[str, int] | None = None
    ) -> CompiledModel:
        """The variant with `moved` applied to the current compiled dims: cached, else re-planned (the
        base plan instead where `moved` only undoes a broken assumption at `dims`, the run's other dims)."""
        current = self.current
        if current is not self.base and self._back_to_base({**current.dims, **moved}, dims or {}):
            stats.plan_switches += 1
            return self.base
        if self.replanner is None:
            detail = ", ".join(f"'{k}' compiled as {current.dims[k]}, asked for {v}" for k, v in sorted(moved.items()))
            raise InputError(
                f"{caller}: cannot change compiled dims ({detail}): the plan bakes them into its shaders and "
                "sizes and has no replanner (it was not made by CompilerPipeline.compile); compile at the new "
                "values, or leave these dims out of the compile dims so they stay symbolic"
            )
        target = {**current.dims, **moved}
        key = _key(target)
        plan = self._plans.get(key)
        if plan is None:
            try:
                plan = self.replanner.replan(target)
            except OnyxiaError as e:  # a compile error: the executor is left as it was
                e.add_note(f"{caller}: while re-planning at compiled dims {target}")
                raise
            if plan.dims != target:
                raise InputError(f"{caller}: the replanner returned a plan for dims {plan.dims}; expected {target}")
            self._plans[key] = plan
            stats.replans += 1
        stats.plan_switches += 1
        return plan


def check_static_required(compiled: CompiledModel, caller: str) -> None:
    """Refuse a plan that left open a dim whose value decides its structure (`CompiledModel.static_required`):
    it is right only at the values its shape rules assumed (an axes-less Squeeze keeps a dim that a 1 would
    drop), and binding the dim at run time cannot restructure it. Compiled with the dim fixed, a new value
    re-plans (`plan_for`), so the plan is right at every value."""
    by_reason: dict[str, list[str]] = {}
    for name, why in sorted(compiled.static_required.items()):
        if name not in compiled.dims:
            by_reason.setdefault(why, []).append(name)
    if by_reason:
        names = sorted(n for group in by_reason.values() for n in group)
        reasons = "; ".join(f"{', '.join(repr(n) for n in group)}: {why}" for why, group in by_reason.items())
        raise PlanningError(
            f"{caller}: plan '{compiled.metadata.get('graph', '?')}' leaves symbolic the dims {names}, whose "
            f"run-time values decide its structure ({reasons}); compile with them among the compile dims "
            "(CompilerPipeline.compile(graph, {name: value}); onyxia.ort does so per value of an input dim)"
        )


def build_pipelines(cache: PipelineCache, compiled: CompiledModel) -> None:
    """Every pipeline `compiled` dispatches, from `cache` where its source is there already: a WGSL error
    in a new variant surfaces before the executor has given up the plan it is running."""
    shaders, cache.shaders = cache.shaders, compiled.shaders
    try:
        for op in compiled.operations:
            for step in op.steps:
                if isinstance(step, Dispatch):
                    cache.pipeline(step, op.name)
    finally:
        cache.shaders = shaders


def adopt_buffers(
    pool: BufferPool, compiled: CompiledModel, previous: BufferPool, before: CompiledModel
) -> tuple[set[int], int]:
    """Move into `pool` (empty, for `compiled`) each buffer of `previous` (for `before`) that still
    serves the same storage, then release the rest. A buffer holding a weight moves only to the same
    weight (same data object, or equal bytes), and no weight moves into a buffer of anything else.
    Returns the ids of the weights already in place and their bytes, which the upload then skips."""
    kept: set[int] = set()
    nbytes = 0
    for ref in {pool.owner(ref) for ref in pool.names}:
        buffer = previous.buffers.get(ref)
        if buffer is None:
            continue
        new, old = _weight(compiled, ref), _weight(before, ref)
        if new is not None or old is not None:
            if new is None or old is None or not _same_data(old, new):
                continue
            assert ref.tensor is not None and isinstance(new.nbytes, int)
            kept.add(ref.tensor)
            nbytes += new.nbytes
        pool.buffers[ref] = previous.buffers.pop(ref)
        pool.stats.buffers_adopted += 1
    pool.staging, previous.staging = previous.staging, None
    previous.release()
    return kept, nbytes


def _weight(plan: CompiledModel, ref: BufferRef) -> PlanTensor | None:
    """The tensor behind `ref` when it is uploaded data (what `upload_weights` writes)."""
    tensor = plan.tensors.get(ref.tensor) if ref.tensor is not None else None
    if tensor is None or tensor.data is None or tensor.role is TensorRole.SYMBOLIC:
        return None
    return tensor


def _same_data(a: PlanTensor, b: PlanTensor) -> bool:
    if (a.dtype, tuple(a.dims)) != (b.dtype, tuple(b.dims)):
        return False
    if a.data is b.data:  # one initializer, shared by the graph both variants were compiled from
        return True
    if isinstance(a.data, np.ndarray) and isinstance(b.data, np.ndarray):  # folded: equal bytes, same weight
        return a.data.dtype == b.data.dtype and a.data.shape == b.data.shape and a.data.tobytes() == b.data.tobytes()
    return False
