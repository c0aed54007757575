"""Everything in a plan that depends on dims, evaluated to plain numbers for one set of dims.

`evaluate_layout` is pure: it touches no GPU object, so a dims change that fails a check (a
violated constraint, a binding over the adapter's limit) raises before the executor changes any
state. The executor then commits the result: grows buffers, rebuilds affected bind groups, and
writes immediates and SYMBOLIC tensors.

Workgroup contract: a dispatch of (x, 1, 1) workgroups with x above the adapter's
max-compute-workgroups-per-dimension is issued as (ceil(x / y), y, 1) with the smallest y that
fits, so shaders derive their linear workgroup index as ``wid.x + wid.y * nwg.x`` (``nwg`` from
``@builtin(num_workgroups)``) and bounds-check it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from onyxia.core.errors import DeviceError, InputError, PlanningError, SymbolicError
from onyxia.core.plan import (
    BufferRef,
    CompiledModel,
    CopyBuffer,
    Dispatch,
    ImmediateField,
    Step,
    TensorRole,
)
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr, evaluate_dim
from onyxia.runtime.convert import padded_nbytes, to_gpu
from onyxia.runtime.device import DeviceContext

__all__ = [
    "CopyValues",
    "DimsLayout",
    "DispatchValues",
    "FlatStep",
    "buffer_sizes",
    "BrokenAssumption",
    "check_constraints",
    "evaluate_layout",
    "flatten_steps",
    "referenced_symbols",
    "split_workgroups",
]


@dataclass(frozen=True)
class FlatStep:
    """One step with its node name and (for dispatches) every immediate field it must receive."""

    node: str
    step: Step
    fields: tuple[ImmediateField, ...] = ()
    immediate_size: int = 0


@dataclass(frozen=True)
class DispatchValues:
    workgroups: tuple[int, int, int] | None  # None: a 0-size dispatch, skipped
    immediates: bytes
    ranges: tuple[tuple[int, int | None], ...]  # (offset, size or None for "to the end") per binding


@dataclass(frozen=True)
class CopyValues:
    size: int
    src_offset: int
    dst_offset: int


StepValues = DispatchValues | CopyValues | None
Names = Mapping[BufferRef, str]


@dataclass
class DimsLayout:
    dims: dict[str, int]
    buffer_bytes: dict[BufferRef, int]  # logical bytes (unpadded)
    steps: list[StepValues]  # parallel to the flat steps; None for WriteBuffer
    symbolic: dict[BufferRef, np.ndarray]  # SYMBOLIC tensors in GPU storage form
    output_shapes: dict[int, tuple[int, ...]]


def flatten_steps(plan: CompiledModel) -> list[FlatStep]:
    """All steps in order; immediates from `Dispatch.immediates` merged with `symbolic_bindings`."""
    extra: dict[tuple[int, int], list[ImmediateField]] = {}
    for sb in plan.symbolic_bindings:
        extra.setdefault((sb.op_index, sb.step_index), []).append(sb.field)
    flat: list[FlatStep] = []
    for op_index, op in enumerate(plan.operations):
        for step_index, step in enumerate(op.steps):
            if not isinstance(step, Dispatch):
                flat.append(FlatStep(op.name, step))
                continue
            fields = {f.offset: f for f in (*step.immediates, *extra.get((op_index, step_index), []))}
            size = plan.shaders[step.shader_index].immediate_size if step.shader_index < len(plan.shaders) else 0
            for f in fields.values():
                if f.offset % 4 or f.offset + 4 > size:
                    raise PlanningError(
                        f"node '{op.name}': immediate '{f.name}' at offset {f.offset} does not fit the "
                        f"shader's {size}-byte immediates block (fields are u32 at 4-byte offsets)"
                    )
            flat.append(FlatStep(op.name, step, tuple(fields.values()), size))
    return flat


def referenced_symbols(plan: CompiledModel, flat: list[FlatStep]) -> set[str]:
    """Every dim name a size, workgroup count, immediate or SYMBOLIC tensor needs."""
    dims: list[object] = [d for t in plan.tensors.values() for d in t.dims]
    dims += [s.size for op in plan.operations for s in op.scratch]
    for fs in flat:
        if isinstance(fs.step, Dispatch):
            dims += [*fs.step.workgroups, *(f.value for f in fs.fields)]
            dims += [x for b in fs.step.bindings for x in (b.offset, b.size)]
        elif isinstance(fs.step, CopyBuffer):
            dims += [fs.step.size, fs.step.src_offset, fs.step.dst_offset]
    for t in plan.tensors.values():
        if t.role is TensorRole.SYMBOLIC and isinstance(t.data, np.ndarray):
            dims += list(t.data.flat)
    return set().union(*(d.names() for d in dims if isinstance(d, SymbolicExpr)))


def _value(dim: SymbolicDim, dims: Mapping[str, int], where: str) -> int:
    try:
        return int(evaluate_dim(dim, dims))
    except SymbolicError as e:
        raise InputError(f"{where}: {e}") from e


def _eval(dim: SymbolicDim, dims: Mapping[str, int], where: str) -> int:
    """A size, offset or count: negative means the dims are inconsistent with the plan."""
    value = _value(dim, dims, where)
    if value < 0:
        raise InputError(f"{where}: '{dim}' evaluates to {value} under dims {dict(dims)}; expected >= 0")
    return value


def buffer_sizes(plan: CompiledModel, dims: Mapping[str, int]) -> dict[BufferRef, int]:
    sizes = {BufferRef(tensor=t.id): _eval(t.nbytes, dims, f"tensor '{t.name}' size") for t in plan.tensors.values()}
    for op in plan.operations:
        for s in op.scratch:
            sizes[BufferRef(scratch=s.id)] = _eval(s.size, dims, f"scratch buffer '{s.label}' size")
    return sizes


def split_workgroups(wg: tuple[int, int, int], limit: int, where: str) -> tuple[int, int, int] | None:
    """`wg` as issued: None when any count is 0, x folded into y when it exceeds `limit`."""
    x, y, z = wg
    if x == 0 or y == 0 or z == 0:
        return None
    if x > limit and y == 1 and z == 1:
        y = -(-x // limit)
        x = -(-x // y)
    if max(x, y, z) > limit:
        raise DeviceError(
            f"{where}: dispatch of {wg} workgroups exceeds the adapter's {limit} per dimension "
            "(only (x, 1, 1) dispatches are split automatically)"
        )
    return x, y, z


def _immediates(fs: FlatStep, dims: Mapping[str, int]) -> bytes:
    block = np.zeros(fs.immediate_size // 4, np.uint32)
    for f in fs.fields:
        value = _eval(f.value, dims, f"node '{fs.node}': immediate '{f.name}'")
        if value > 0xFFFFFFFF:
            raise InputError(f"node '{fs.node}': immediate '{f.name}' = {value} does not fit a u32")
        block[f.offset // 4] = value
    return block.tobytes()


def _ranges(
    fs: FlatStep, dims: Mapping[str, int], sizes: Mapping[BufferRef, int], ctx: DeviceContext, names: Names
) -> tuple[tuple[int, int | None], ...]:
    """Binding ranges checked against the adapter: WebGPU would reject them at bind group creation
    with a message naming neither the node nor the tensor."""
    assert isinstance(fs.step, Dispatch)
    ranges: list[tuple[int, int | None]] = []
    for b in fs.step.bindings:
        name = names[b.buffer]
        where = f"node '{fs.node}': binding {b.binding} (tensor '{name}')"
        offset = _eval(b.offset, dims, f"{where} offset")
        size = None if b.size is None else padded_nbytes(_eval(b.size, dims, f"{where} size"))
        available = padded_nbytes(sizes[b.buffer])
        if offset == 0 and size is None and available > ctx.max_binding_size:
            raise DeviceError(
                f"{where}: bound whole at {available} bytes, over the adapter's max-storage-buffer-binding-size "
                f"of {ctx.max_binding_size} bytes; the plan must bind it in ranges (BindingDesc.offset/size)"
            )
        if offset % ctx.offset_alignment:
            raise DeviceError(f"{where}: offset {offset} is not a multiple of {ctx.offset_alignment} bytes")
        if size is not None and size > ctx.max_binding_size:
            raise DeviceError(f"{where}: range of {size} bytes exceeds the binding limit {ctx.max_binding_size}")
        if offset + (size or 0) > available:
            raise DeviceError(f"{where}: range [{offset}, {offset + (size or 0)}) exceeds its {available} bytes")
        ranges.append((offset, size))
    return tuple(ranges)


def _step_values(fs: FlatStep, layout: DimsLayout, ctx: DeviceContext, names: Names) -> StepValues:
    dims = layout.dims
    if isinstance(fs.step, CopyBuffer):
        where = f"node '{fs.node}': copy"
        values = CopyValues(*(_eval(v, dims, where) for v in (fs.step.size, fs.step.src_offset, fs.step.dst_offset)))
        if values.size % 4 or values.src_offset % 4 or values.dst_offset % 4:
            raise DeviceError(f"{where}: size and offsets must be multiples of 4 bytes, found {values}")
        for ref, offset in ((fs.step.src, values.src_offset), (fs.step.dst, values.dst_offset)):
            available = padded_nbytes(layout.buffer_bytes[ref])
            if values.size and offset + values.size > available:
                raise DeviceError(
                    f"{where}: bytes [{offset}, {offset + values.size}) of '{names[ref]}' are out of its {available}"
                )
        return values
    if not isinstance(fs.step, Dispatch):
        return None
    where = f"node '{fs.node}'"
    x, y, z = (_eval(w, dims, f"{where}: workgroups") for w in fs.step.workgroups)
    workgroups = split_workgroups((x, y, z), ctx.max_workgroups, where)
    if workgroups is None:
        return DispatchValues(None, b"", ())
    return DispatchValues(workgroups, _immediates(fs, dims), _ranges(fs, dims, layout.buffer_bytes, ctx, names))


class BrokenAssumption(InputError):
    """Dims that contradict an equality a shape rule assumed (`CompiledModel.constraints`: a symbolic dim
    broadcast against another is taken as equal to it). `dims` holds the values of the names in that
    constraint: compiled static at them, the shape rules see the real sizes (a 1 broadcasts), which is
    what `PlanVariants.for_broken` asks the replanner for where the plan allows it."""

    def __init__(self, message: str, dims: dict[str, int]) -> None:
        super().__init__(message)
        self.dims = dims


def check_constraints(plan: CompiledModel, dims: Mapping[str, int]) -> None:
    for a, b, description in plan.constraints:
        va, vb = (_eval(d, dims, f"constraint '{description}'") for d in (a, b))
        if va != vb:
            names = {n for d in (a, b) if isinstance(d, SymbolicExpr) for n in d.names()}
            raise BrokenAssumption(
                f"dims break an assumption the model was compiled under ({description}): "
                f"'{a}' = {va} but '{b}' = {vb}; expected them equal",
                {n: dims[n] for n in sorted(names)},
            )


def _symbolic_tensors(plan: CompiledModel, dims: Mapping[str, int]) -> dict[BufferRef, np.ndarray]:
    out: dict[BufferRef, np.ndarray] = {}
    for t in plan.tensors.values():
        if t.role is TensorRole.SYMBOLIC and t.data is not None:
            data = np.asarray(t.data)
            # values, not sizes: a Reshape target's -1 or a Slice's negative end are legitimate
            values = np.array([_value(v, dims, f"SYMBOLIC tensor '{t.name}'") for v in data.flat], dtype=np.int64)
            logical = values.reshape(data.shape).astype(t.dtype.numpy)
            out[BufferRef(tensor=t.id)] = to_gpu(f"SYMBOLIC tensor '{t.name}'", t.dtype, logical, InputError)
    return out


def evaluate_layout(
    plan: CompiledModel, flat: list[FlatStep], dims: Mapping[str, int], ctx: DeviceContext, names: Names
) -> DimsLayout:
    """Every dims-dependent number of `plan` under `dims`; raises before anything is committed."""
    check_constraints(plan, dims)
    layout = DimsLayout(dict(dims), buffer_sizes(plan, dims), [], _symbolic_tensors(plan, dims), {})
    layout.steps = [_step_values(fs, layout, ctx, names) for fs in flat]
    for tid in plan.outputs:
        t = plan.tensors[tid]
        layout.output_shapes[tid] = tuple(_eval(d, dims, f"output '{t.name}' dims") for d in t.dims)
    return layout
