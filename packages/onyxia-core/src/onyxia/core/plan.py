"""The compiled plan: everything the runtime needs, nothing about ONNX.

A `CompiledModel` is plain data: tensors to allocate (with their symbolic dims), WGSL shaders after
preprocessing, and per operator a list of steps. Anything that depends on a symbolic dim is
stored as an expression — buffer sizes, immediates (`SymbolicBinding`) and workgroup counts — so
the runtime can re-evaluate it in `update_dimensions()` without recompiling a shader.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Union

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.shapes import dims_product
from onyxia.core.symbolic import SymbolicDim
from onyxia.core.values import TensorValue

__all__ = [
    "BindingDesc",
    "BufferRef",
    "CompiledModel",
    "CompiledShader",
    "CopyBuffer",
    "Dispatch",
    "ImmediateField",
    "PlanTensor",
    "PlannedOp",
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
            return (self.numel + 1) // 2  # type: ignore[operator]
        return self.numel * self.dtype.gpu_numpy.itemsize  # type: ignore[operator]


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


Step = Union[Dispatch, CopyBuffer, WriteBuffer]


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
    # output tensor id -> input tensor id: one buffer serves both (state updated in place)
    aliases: dict[int, int] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    def tensor_by_name(self, name: str) -> PlanTensor:
        for t in self.tensors.values():
            if t.name == name:
                return t
        raise KeyError(name)

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
