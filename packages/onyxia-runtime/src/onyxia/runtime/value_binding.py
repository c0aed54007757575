"""Dims bound from input *values*: graph-input elements the plan uses as sizes, and GPU read-backs.

The compiler names such dims like any other symbol (``shape[1]``: element 1 of input ``shape``)
and lists where each comes from (`CompiledModel.value_symbols`) and what the plan assumed about it
(`value_checks`: a Reshape size is at least 1, a Slice bound inside its axis). `ValueBinder` reads
the host arrays `run()` was given, before anything is uploaded: the dims then go through the same
update as dims bound from input shapes, so a new value patches immediates and sizes and never
rebuilds a pipeline. A value the plan cannot honour is an `InputError` naming the node, the input
and the value, raised before the run changes any state.

Dims a `ReadValues` step binds (NonZero's count) start at 1 before their first read-back (a size
that any expression may divide by), so a plan that has them can be laid out before anything ran;
`runtime/segments.py` runs it, and checks the plan's assumptions on them once they are read.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from onyxia.core.errors import InputError, SymbolicError
from onyxia.core.plan import HOST_STEPS, BufferRef, CompiledModel, CopyBuffer, Dispatch, WriteBuffer
from onyxia.core.plan_values import ValueCheck, ValueSymbol, fill_values, specialized_dim
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr, evaluate_dim
from onyxia.runtime.layout import flatten_steps, referenced_symbols

__all__ = ["ValueBinder", "check_values"]


class ValueBinder:
    """The plan's value symbols, grouped by input, and the checks on them."""

    def __init__(self, plan: CompiledModel) -> None:
        names = {t.id: t.name for t in plan.tensors.values()}
        self._by_input: dict[str, list[ValueSymbol]] = {}
        for vs in plan.value_symbols:
            self._by_input.setdefault(names[vs.input], []).append(vs)
        self._checks = list(plan.value_checks)
        self._fills = list(plan.value_fills)
        self._compiled = {vs.symbol: plan.dims[vs.symbol] for vs in plan.value_symbols if vs.symbol in plan.dims}
        self._dtypes = {plan.tensors[vs.input].name: plan.tensors[vs.input].dtype.numpy for vs in plan.value_symbols}
        # a symbol no size, immediate or count uses is only checked, never handed to the layout
        self._used = referenced_symbols(plan, flatten_steps(plan)) if plan.value_symbols else set()
        self.read_back = {
            symbol for op in plan.operations for s in op.steps if isinstance(s, HOST_STEPS) for symbol in s.symbols
        }
        self.unread = _unread_inputs(plan) if plan.value_symbols else set()  # values only the host reads
        self.host_inputs = set(self._by_input)  # inputs whose values bind dims: a subplan's driver reads them

    def bind(self, inputs: Mapping[str, np.ndarray], dims: Mapping[str, int]) -> dict[str, int]:
        """Dims from the values of `inputs` (already checked for dtype and shape), checked against the
        plan's assumptions under `dims`; read-back dims not bound yet start at 1."""
        values: dict[str, int] = {}
        for name, symbols in self._by_input.items():
            if name in inputs:
                raw = np.asarray(inputs[name]).reshape(-1)
                values.update({vs.symbol: int(raw[vs.index]) for vs in symbols})
        if values:  # checks on read-back dims wait for the read-back (`resolve_read`)
            values = self._fill(values, dims)
            early = [c for c in self._checks if not _names(c) & self.read_back]
            check_values(early, {**dims, **values}, values)
        bound = {k: v for k, v in values.items() if k in self._used}
        bound.update({s: 1 for s in self.read_back if s not in dims})  # a size that divides, until read
        return bound

    def specialized(self, inputs: Mapping[str, np.ndarray]) -> dict[str, int]:
        """Compiled dims that `inputs`' values move: inputs the plan is specialized for (a Reduce axis
        given at run time). The executor switches to the plan for the new values (`compiler.deferred`)."""
        moved: dict[str, int] = {}
        for name, symbols in self._by_input.items():
            if name not in inputs:
                continue
            raw = np.asarray(inputs[name]).reshape(-1)
            for vs in symbols:
                if vs.symbol in self._compiled and vs.index < raw.size:
                    try:
                        dim = specialized_dim(raw[vs.index], self._dtypes[name])
                    except InputError as e:
                        raise InputError(f"input '{name}' element {vs.index}: {e}") from e
                    if dim != self._compiled[vs.symbol]:
                        moved[vs.symbol] = dim
        return moved

    def resolve_read(self, dims: Mapping[str, int], read: Mapping[str, int]) -> dict[str, int]:
        """Dims just read back (`runtime/segments.py`) as the sizes they stand for, checked under all
        the dims bound now."""
        values = self._fill(read, dims)
        check_values([c for c in self._checks if _names(c) & read.keys()], {**dims, **values}, values)
        return values

    def _fill(self, raw: Mapping[str, int], dims: Mapping[str, int]) -> dict[str, int]:
        """`raw` with every fill whose symbols it binds applied (-1 and 0 of a target, clamped bounds)."""
        values = dict(raw)
        for fill in self._fills:
            names = [o for o in fill.operands if isinstance(o, str)]
            if names and all(n in raw for n in names):
                values.update(fill_values(fill, raw, [_dim(d, dims, fill.where) for d in fill.dims]))
        return values


def check_values(checks: list[ValueCheck], dims: Mapping[str, int], values: Mapping[str, int]) -> None:
    """Raise an `InputError` for the first check that `dims` break; checks with unbound names wait
    for the layout (which names them)."""
    for check in checks:
        try:
            found = evaluate_dim(check.expr, dims)
        except SymbolicError:
            continue
        if found < check.minimum or (check.maximum is not None and found > check.maximum):
            expected = f"[{check.minimum}, {check.maximum}]" if check.maximum is not None else f">= {check.minimum}"
            given = ", ".join(f"{k} = {values[k]}" for k in sorted(_names(check)) if k in values)
            raise InputError(
                f"{check.where}: '{check.expr}' is {found} with {given or 'the current dims'}; the plan needs it "
                f"{expected}"
            )


def _dim(dim: SymbolicDim, dims: Mapping[str, int], where: str) -> int:
    try:
        return evaluate_dim(dim, dims)
    except SymbolicError as e:
        raise InputError(f"{where}: {e}") from e


def _names(check: ValueCheck) -> set[str]:
    return check.expr.names() if isinstance(check.expr, SymbolicExpr) else set()


def _unread_inputs(plan: CompiledModel) -> set[str]:
    """Inputs with value symbols that no step reads and no output is: never uploaded (an int64 Slice
    end of 2^63 - 1 is a fine value on the host, and no i32 on the GPU)."""
    owners = plan.storage_owners(groups=False)
    refs: set[BufferRef] = {BufferRef(tensor=t) for t in plan.outputs}
    for op in plan.operations:
        for step in op.steps:
            if isinstance(step, Dispatch):
                refs.update(b.buffer for b in step.bindings)
            elif isinstance(step, CopyBuffer):
                refs.update((step.src, step.dst))
            elif isinstance(step, WriteBuffer):
                refs.add(step.dst)
            elif isinstance(step, HOST_STEPS):
                refs.update(step.reads())
    read = {owners.get(r, r) for r in refs}
    inputs = {vs.input for vs in plan.value_symbols}
    return {plan.tensors[t].name for t in inputs if BufferRef(tensor=t) not in read}
