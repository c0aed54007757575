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
from typing import Protocol, Union

import numpy as np

from onyxia.core.dtypes import DataType
from onyxia.core.errors import PlanningError
from onyxia.core.plan_errors import ERROR_SLOT_WORDS, ErrorCode, ErrorSlot
from onyxia.core.plan_steps import BindingDesc, BufferRef, CopyBuffer, Dispatch, ImmediateField, ReadValues, WriteBuffer
from onyxia.core.plan_values import ValueCheck, ValueFill, ValueSymbol
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
    "ERROR_SLOT_WORDS",
    "HOST_STEPS",
    "ErrorCode",
    "ErrorSlot",
    "ImmediateField",
    "LoopRoles",
    "PlanTensor",
    "PlannedOp",
    "ReadValues",
    "Replanner",
    "RunSubplan",
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


# Control flow (If, Loop) as a step the host drives between segments: a branch or loop body is a plan
# of its own; the executor submits the steps before, runs the subplans on the same device with their
# inputs copied from the outer buffers on the GPU (an If's condition, a Loop's trip count and condition
# are the only values read back, none when the dims decide them), then copies the results out. Output
# dims a subplan decides are fresh symbols bound from its results, as `ReadValues` binds NonZero's count.
@dataclass(frozen=True)
class LoopRoles:
    """What a `Loop` body's plan inputs and outputs mean (names in the body plan; None: unused).

    `carried` body outputs feed the carried inputs of the next iteration; `scanned` outputs are
    stacked along a new first axis. `condition_passthrough`: the body returns its condition input
    unchanged (or a constant true), so no iteration needs a read-back to know whether to go on."""

    iteration: str | None
    condition_in: str | None
    condition_out: str
    carried_in: tuple[str | None, ...]
    carried_out: tuple[str, ...]
    scanned: tuple[str, ...]
    condition_passthrough: bool


@dataclass
class RunSubplan:
    """One `If` (`plans` = then, else) or `Loop` (`plans` = body,) node, run by the host.

    `inputs` are the node's inputs (its own, then its subgraphs' outer-scope reads) with their dims
    under the outer plan; `feeds[p]` maps node input index -> input name of plan p. `results[p]`
    names, per node output, the plan output it is copied from (a Loop: carried outputs, then the
    stacked ones). `symbols` are the names in `output_dims` this step binds. `condition` (If) and
    `trip_count` (Loop) are set when the dims decide them, so nothing is read back for them."""

    kind: str
    node: str
    plans: tuple[CompiledModel, ...]
    inputs: tuple[BufferRef | None, ...]
    input_dims: tuple[tuple[SymbolicDim, ...], ...]
    feeds: tuple[tuple[tuple[int, str], ...], ...]
    outputs: tuple[BufferRef | None, ...]
    output_dims: tuple[tuple[SymbolicDim, ...], ...]
    results: tuple[tuple[str, ...], ...]
    symbols: tuple[str, ...]
    condition: SymbolicDim | None = None
    trip_count: SymbolicDim | None = None
    loop: LoopRoles | None = None

    def reads(self) -> tuple[BufferRef, ...]:
        return tuple(ref for ref in self.inputs if ref is not None)

    def writes(self) -> tuple[BufferRef, ...]:
        return tuple(ref for ref in self.outputs if ref is not None)


Step = Union[Dispatch, CopyBuffer, WriteBuffer, ReadValues, RunSubplan]

HOST_STEPS = (ReadValues, RunSubplan)
"""Steps that end a segment: the host submits what came before, then binds the dims they decide."""


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
    # dim name -> the node whose structure its value decides (`NodeCtx.mark_static_required`: an axes-less Squeeze
    # keeps a symbolic dim, which onnxruntime drops where it is 1): the runtime refuses a plan leaving one open
    # (not in `dims`); onyxia.ort compiles per value of exactly these. No kernel asks for a dim static merely to
    # run faster: the tiled convs take spatial dims as immediates, so an open image size costs no speed
    static_required: dict[str, str] = field(default_factory=dict)
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
    def demoted(self) -> tuple[str, ...]:
        """Names of this plan's tensors that the GPU holds less precisely than declared (float64 as f32:
        `DataType.is_demoted`), so they and what is computed from them are approximate. A subplan
        (If/Loop) reports its own."""
        return tuple(t.name for t in self.tensors.values() if t.dtype.is_demoted)

    def demotion_summary(self, shown: int = 3) -> str:
        """One line on `demoted` for warnings and the CLI ("" when nothing is): count, types, first names."""
        demoted = [t for t in self.tensors.values() if t.dtype.is_demoted]
        if not demoted:
            return ""
        kinds = ", ".join(sorted({f"{t.dtype.name.lower()} as {t.dtype.wgsl}" for t in demoted}))
        listed = ", ".join(f"'{t.name}'" for t in demoted[:shown])
        more = f" and {len(demoted) - shown} more" if len(demoted) > shown else ""
        plural = "s" if len(demoted) > 1 else ""
        return f"{len(demoted)} tensor{plural} computed in a less precise type ({kinds}), results approximate: {listed}{more}"

    @property
    def dispatch_count(self) -> int:
        return sum(isinstance(s, Dispatch) for op in self.operations for s in op.steps)
