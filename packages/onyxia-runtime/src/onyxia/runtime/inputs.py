"""Checking run() inputs against the plan and binding symbolic dims from their shapes.

Dtypes are strict: an int64 input given as int32 is refused rather than cast, because a silent
cast hides a caller bug (token ids from the wrong tokenizer path) and costs a copy. A dim that is
a plain name (``batch``) is bound from the array; a dim that is an expression (``past + seq``) is
only checked, since its names must come from another input or from `update_dimensions`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import InputError, SymbolicError
from onyxia.core.plan import BufferRef, CompiledModel
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.runtime.convert import PACKED_TYPES, pack_input, to_gpu
from onyxia.runtime.value_binding import ValueBinder

__all__ = ["InputBinder", "InputSpec", "checked_dims"]


def checked_dims(dims: Mapping[str, int]) -> dict[str, int]:
    """`dims` as plain ints; anything but a non-negative integer is an `InputError` naming the dim."""
    checked: dict[str, int] = {}
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise InputError(f"dim '{name}' = {value!r}; expected a non-negative integer")
        checked[name] = int(value)
    return checked


@dataclass(frozen=True)
class InputSpec:
    name: str
    ref: BufferRef
    dtype: DataType
    dims: tuple[SymbolicDim, ...]


class InputBinder:
    """The model's inputs; `bind` validates one run's arrays and returns dims and upload data."""

    def __init__(self, plan: CompiledModel) -> None:
        self.specs: list[InputSpec] = []
        for tid in plan.inputs:
            t = plan.tensors[tid]
            self.specs.append(InputSpec(t.name, BufferRef(tensor=tid), t.dtype, tuple(t.dims)))
        self.names = [s.name for s in self.specs]
        self._all = set(self.names)
        self.resident: set[str] = set()  # inputs whose buffer persists across runs (KV cache state)
        self.values = ValueBinder(plan)  # dims bound from input values (a Reshape target given at run time)
        self._shapes = {s.name: _ShapeCheck(s) for s in self.specs}

    def bind(
        self, inputs: Mapping[str, np.ndarray], dims: Mapping[str, int], fed: Collection[str] = ()
    ) -> tuple[dict[str, int], list[tuple[BufferRef, np.ndarray]]]:
        """(dims bound from plain-name input dims, [(buffer, GPU-form array)]) for one run.

        A resident input may be left out: its buffer keeps what the previous run left there. Inputs
        in `fed` are copied in on the GPU (`runtime/control_flow.py`): only their shapes are read."""
        self._check_names(inputs)
        given = [s for s in self.specs if s.name in inputs]
        bound: dict[str, tuple[int, str]] = {}
        for spec in given:
            if not self._shapes[spec.name].passes(inputs[spec.name], bound):
                self._check_array(spec, inputs[spec.name], bound)
        merged = {**dims, **{k: v for k, (v, _) in bound.items()}}
        values = self.values.bind({s.name: inputs[s.name] for s in given}, merged)
        merged.update(values)
        for spec in given:
            if self._shapes[spec.name].expressions:
                self._check_expressions(spec, inputs[spec.name].shape, merged)
        given = [s for s in given if s.name not in self.values.unread and s.name not in fed]  # host-only values
        uploads = [(s.ref, _gpu_form(s, inputs[s.name])) for s in given]
        return {**{k: v for k, (v, _) in bound.items()}, **values}, uploads

    def _check_names(self, inputs: Mapping[str, np.ndarray]) -> None:
        if inputs.keys() <= self._all and not self._all - self.resident - inputs.keys():
            return
        missing = [n for n in self.names if n not in inputs and n not in self.resident]
        extra = sorted(n for n in inputs if n not in self.names)
        if missing or extra:
            found = [f"missing {missing}"] * bool(missing) + [f"unexpected {extra}"] * bool(extra)
            raise InputError(f"run() inputs: {', '.join(found)}; the model expects exactly {self.names}")

    def _check_array(self, spec: InputSpec, array: object, bound: dict[str, tuple[int, str]]) -> None:
        where = f"input '{spec.name}'"
        if not isinstance(array, np.ndarray):
            raise InputError(f"{where}: expected a numpy array of {spec.dtype.numpy}, given {type(array).__name__}")
        if spec.dtype not in PACKED_TYPES and array.dtype != spec.dtype.numpy:  # 4-bit: `pack_input` checks
            raise InputError(
                f"{where}: dtype is {array.dtype}; expected {spec.dtype.numpy} ({spec.dtype.name}), "
                f"convert with .astype(np.{spec.dtype.numpy})"
            )
        if array.ndim != len(spec.dims):
            raise InputError(
                f"{where}: rank {array.ndim} (shape {list(array.shape)}); expected rank {len(spec.dims)} "
                f"with dims [{', '.join(map(str, spec.dims))}]"
            )
        for axis, (dim, size) in enumerate(zip(spec.dims, array.shape)):
            if isinstance(dim, int) and dim != size:
                raise InputError(f"{where}: dim {axis} is {size}; expected {dim} (shape {list(array.shape)})")
            if isinstance(dim, SymbolicExpr) and dim.is_name:
                symbol = str(dim)
                if symbol in bound and bound[symbol][0] != size:
                    value, origin = bound[symbol]
                    raise InputError(
                        f"{where}: dim {axis} ('{symbol}') is {size}, but {origin} set '{symbol}' to {value}; "
                        "inputs sharing a dim must agree"
                    )
                bound.setdefault(symbol, (size, f"{where} dim {axis}"))

    def _check_expressions(self, spec: InputSpec, shape: tuple[int, ...], dims: Mapping[str, int]) -> None:
        for axis, (dim, size) in enumerate(zip(spec.dims, shape)):
            if not isinstance(dim, SymbolicExpr) or dim.is_name:
                continue
            where = f"input '{spec.name}': dim {axis} ('{dim}')"
            try:
                value = dim.evaluate(dims)
            except SymbolicError as e:
                raise InputError(
                    f"{where} cannot be checked: {e}; bind its names with load_model(dims=...) or update_dimensions()"
                ) from e
            if value != size:
                raise InputError(f"{where} is {size}; the current dims {dict(dims)} make it {value}")


class _ShapeCheck:
    """One input's dtype, rank and dims, sorted once for the common case: `passes` accepts an array that
    matches and binds its named dims; anything else goes to `_check_array`, which names what is wrong
    (a decode step binds a few small inputs every token, so the plain walk over dims shows)."""

    def __init__(self, spec: InputSpec) -> None:
        self.dtype = None if spec.dtype in PACKED_TYPES else spec.dtype.numpy
        self.rank = len(spec.dims)
        self.fixed = tuple((axis, d) for axis, d in enumerate(spec.dims) if isinstance(d, int))
        self.named = tuple(  # (axis, symbol, where the binding came from, for `_check_array`'s errors)
            (axis, str(d), f"input '{spec.name}' dim {axis}")
            for axis, d in enumerate(spec.dims)
            if isinstance(d, SymbolicExpr) and d.is_name
        )
        self.expressions = any(isinstance(d, SymbolicExpr) and not d.is_name for d in spec.dims)

    def passes(self, array: object, bound: dict[str, tuple[int, str]]) -> bool:
        if not isinstance(array, np.ndarray) or self.dtype is None or array.dtype != self.dtype:
            return False
        shape = array.shape
        if len(shape) != self.rank or any(shape[axis] != d for axis, d in self.fixed):
            return False
        if any(symbol in bound and bound[symbol][0] != shape[axis] for axis, symbol, _ in self.named):
            return False
        for axis, symbol, origin in self.named:
            bound.setdefault(symbol, (shape[axis], origin))
        return True


def _gpu_form(spec: InputSpec, array: np.ndarray) -> np.ndarray:
    where = f"input '{spec.name}'"
    if spec.dtype in PACKED_TYPES:
        return pack_input(where, spec.dtype, array, InputError)
    return to_gpu(where, spec.dtype, array, InputError)
