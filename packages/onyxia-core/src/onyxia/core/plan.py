"""The compiled plan: everything the runtime needs, nothing about ONNX.

A `CompiledModel` is plain data: tensors to allocate (with their symbolic dims), WGSL shaders after
preprocessing, and per operator a list of steps. Anything that depends on a symbolic dim is
stored as an expression — buffer sizes, immediates (`SymbolicBinding`) and workgroup counts — so
the runtime can re-evaluate it in `update_dimensions()` without recompiling a shader.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, Union

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import PlanningError
from onyxia.core.plan_errors import ERROR_SLOT_WORDS, ErrorCode, ErrorSlot
from onyxia.core.plan_values import ValueCheck, ValueFill, ValueSymbol
from onyxia.core.shapes import dims_product
from onyxia.core.symbolic import SymbolicDim
from onyxia.core.values import TensorValue

if TYPE_CHECKING:
    from onyxia.core.plan_control import RunSubplan

__all__ = [
    "BindingDesc",
    "BufferRef",
    "CompiledModel",
    "CompiledShader",
    "CopyBuffer",
    "Dispatch",
    "ERROR_SLOT_WORDS",
    "ErrorCode",
    "ErrorSlot",
    "ImmediateField",
    "PlanTensor",
    "PlannedOp",
    "ReadValues",
    "Replanner",
    "ScratchBufferDesc",
    "Step",
    "SymbolicBinding",
    "TensorRole",
    "WriteBuffer",
]


class TensorRole(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    WEIGHT = "weight"  # uploaded once: initializers and folded constants that GPU steps read
    INTERMEDIATE = "intermediate"
    SYMBOLIC = "symbolic"  # a folded value holding dim expressions: re-written when dims change
    ERRORS = "errors"  # the run-time error word: kernels report into it, the runtime reads it with the outputs


@dataclass
class PlanTensor:
    """A GPU buffer to allocate. `dims` are logical; the buffer holds `dtype.gpu_numpy` elements."""

    id: int
    name: str
    dtype: DataType
    dims: tuple[SymbolicDim, ...]
    role: TensorRole
    data: TensorValue | np.ndarray | None = None

    @property
    def numel(self) -> SymbolicDim:
        return dims_product(self.dims)

    @property
    def nbytes(self) -> SymbolicDim:
        """Bytes of GPU storage (4-bit types stay packed, so they are counted as bytes)."""
        if self.dtype in (DataType.UINT4, DataType.INT4):
            return (self.numel + 1) // 2
        return self.numel * self.dtype.gpu_numpy.itemsize


@dataclass(frozen=True)
class BufferRef:
    """A buffer: a plan tensor (`tensor` id) or a per-op scratch buffer (`scratch` id)."""

    tensor: int | None = None
    scratch: int | None = None


@dataclass(frozen=True)
class BindingDesc:
    """One storage binding of a dispatch; `offset`/`size` (bytes) bind a range of the buffer."""

    binding: int
    buffer: BufferRef
    read_only: bool
    offset: SymbolicDim = 0
    size: SymbolicDim | None = None


@dataclass(frozen=True)
class ImmediateField:
    """A u32 slot in a shader's immediates block and the dim expression it holds."""

    name: str
    offset: int
    value: SymbolicDim


@dataclass
class Dispatch:
    """Run `shader_index` over `workgroups` (expressions: a smaller seq len dispatches less)."""

    shader_index: int
    bindings: list[BindingDesc]
    workgroups: tuple[SymbolicDim, SymbolicDim, SymbolicDim]
    immediates: list[ImmediateField] = field(default_factory=list)


@dataclass
class CopyBuffer:
    src: BufferRef
    dst: BufferRef
    size: SymbolicDim
    src_offset: SymbolicDim = 0
    dst_offset: SymbolicDim = 0


@dataclass
class WriteBuffer:
    """Host data written into a buffer before the run's commands execute."""

    dst: BufferRef
    data: bytes
    offset: int = 0


@dataclass
class ReadValues:
    """Read `len(symbols)` i32 words of `src` (from byte `offset`) back after the steps before this one,
    and bind word i to the dim `symbols[i]` before the steps after it run (`onyxia.core.plan_values`)."""

    src: BufferRef
    symbols: tuple[str, ...]
    offset: int = 0

    def reads(self) -> tuple[BufferRef, ...]:
        return (self.src,)

    def writes(self) -> tuple[BufferRef, ...]:
        return ()


Step = Union[Dispatch, CopyBuffer, WriteBuffer, ReadValues, "RunSubplan"]


@dataclass
class ScratchBufferDesc:
    id: int
    size: SymbolicDim
    label: str


@dataclass
class PlannedOp:
    """The steps of one IR node, in order. `name` is the node name, for errors and profiles."""

    name: str
    op_type: str
    steps: list[Step] = field(default_factory=list)
    scratch: list[ScratchBufferDesc] = field(default_factory=list)


@dataclass(frozen=True)
class CompiledShader:
    """Preprocessed WGSL. `immediate_size` bytes of immediates (0: none) are declared as
    `var<immediate> imm: Immediates;`, which the runtime may rewrite to a uniform binding."""

    label: str
    source: str
    entry_point: str = "main"
    immediate_size: int = 0


@dataclass(frozen=True)
class SymbolicBinding:
    """Where a symbolic dim was written: op index, step index, immediate field."""

    op_index: int
    step_index: int
    field: ImmediateField


class Replanner(Protocol):
    """Plans the same model again at other values of the dims it was compiled with (`CompiledModel.dims`).

    Those dims are baked in: shader defs (literals the WGSL compiler unrolls on), buffer sizes,
    folded constants. Only the compiler can redo that, and the runtime must not import it, so the
    compiler attaches this hook to what it returns; the runtime calls it when `update_dimensions`
    or an input's shape moves such a dim, and reuses every pipeline whose source did not change."""

    @property
    def input_dims(self) -> Mapping[str, tuple[SymbolicDim, ...]]:
        """Each graph input's dims as the graph declares them, before the compile dims bound them: which
        input axis carries which compiled dim, so an input of a new shape can ask for a re-plan."""
        ...

    def replan(self, dims: Mapping[str, int]) -> CompiledModel:
        """The model compiled at `dims` (every name of `CompiledModel.dims`), with a replanner attached."""
        ...


@dataclass
class CompiledModel:
    operations: list[PlannedOp]
    shaders: list[CompiledShader]
    tensors: dict[int, PlanTensor]
    inputs: list[int]
    outputs: list[int]
    symbolic_bindings: list[SymbolicBinding]
    dims: dict[str, int] = field(default_factory=dict)
    required_features: set[str] = field(default_factory=set)
    constraints: list[tuple[SymbolicDim, SymbolicDim, str]] = field(default_factory=list)
    # output tensor id -> input tensor id: one buffer serves both (state updated in place, or a view);
    # chains (a view of a view) are allowed and resolve to the last tensor's buffer
    aliases: dict[int, int] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    # buffers whose lifetimes never overlap, each group served by one GPU buffer sized for its largest
    # member under the current dims; members are storage roots (never a tensor in `aliases`' keys)
    buffer_groups: list[tuple[BufferRef, ...]] = field(default_factory=list)
    # run-time checks: slot i of the ERRORS tensor `error_tensor` (ERROR_SLOT_WORDS u32 each) is error_slots[i]'s
    error_slots: list[ErrorSlot] = field(default_factory=list)
    error_tensor: int | None = None
    # dims bound from values at run time (graph-input elements on the host; `ReadValues` steps read the
    # others back): where each input element goes, what the plan assumed of them, how raw values become sizes
    value_symbols: list[ValueSymbol] = field(default_factory=list)
    value_checks: list[ValueCheck] = field(default_factory=list)
    value_fills: list[ValueFill] = field(default_factory=list)  # how raw values become sizes (-1, clamps)
    # re-plans at other values of `dims` (attached by the compiler; None for a plan built by hand)
    replanner: Replanner | None = field(default=None, repr=False, compare=False)

    def tensor_by_name(self, name: str) -> PlanTensor:
        for t in self.tensors.values():
            if t.name == name:
                return t
        raise KeyError(name)

    def storage_owners(self, *, groups: bool = True) -> dict[BufferRef, BufferRef]:
        """Each buffer ref served by another ref's GPU buffer -> that owner.

        Alias chains are followed to their root (a Reshape of an Unsqueeze of `x` lives in `x`'s
        buffer), then (with `groups`) a root in a buffer group is served by the group's first member."""
        owners: dict[BufferRef, BufferRef] = {}
        for out in self.aliases:
            chain, root = [out], self.aliases[out]
            while root in self.aliases:
                if root in chain:
                    names = [self.tensors[t].name if t in self.tensors else str(t) for t in chain]
                    raise PlanningError(f"tensor aliases form a cycle through {names}")
                chain.append(root)
                root = self.aliases[root]
            owners[BufferRef(tensor=out)] = BufferRef(tensor=root)
        grouped = {member: group[0] for group in self.buffer_groups if groups for member in group[1:]}
        for ref, owner in owners.items():
            owners[ref] = grouped.get(owner, owner)
        for member, owner in grouped.items():
            if member in owners:
                raise PlanningError(f"buffer group member {member} is an alias of {owners[member]}, not a storage root")
            owners[member] = owner
        return owners

    @property
    def symbols(self) -> set[str]:
        """Dim names left symbolic in the plan (bound at run time)."""
        names: set[str] = set()
        for t in self.tensors.values():
            for d in t.dims:
                if not isinstance(d, int):
                    names |= d.names()
        return names

    @property
    def dispatch_count(self) -> int:
        return sum(isinstance(s, Dispatch) for op in self.operations for s in op.steps)
