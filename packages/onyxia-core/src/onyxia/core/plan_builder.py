"""The builder that collects every op's steps, tensors and shaders into one `CompiledModel`.

Planning makes one `PlanBuilder` per model and one `PlanCtx` per node; the builder owns what is
shared across nodes: plan tensors (created on first use, with their role and upload data), shaders
(deduplicated by label and defs, so a hundred Adds compile one pipeline), derived constants and the
GPU features the plan needs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from onyxia.core.dtypes import DataType, require_gpu_type
from onyxia.core.errors import PlanningError
from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import TensorDef, TensorKind
from onyxia.core.nibbles import pack_4bit
from onyxia.core.plan import (
    ERROR_SLOT_WORDS,
    BufferRef,
    CompiledModel,
    CompiledShader,
    Dispatch,
    ErrorSlot,
    ImmediateField,
    PlannedOp,
    PlanTensor,
    SymbolicBinding,
    TensorRole,
)
from onyxia.core.shader_dims import DimValue, declare_immediates, shader_dims
from onyxia.core.shapes import Absent
from onyxia.core.values import TensorValue
from onyxia.core.wgsl import ShaderLibrary, preprocess

__all__ = ["ERRORS_NAME", "PlanBuilder", "ShaderHandle"]

ERRORS_NAME = "onyxia/errors"  # the plan tensor of the run-time error word

_SUBGROUP_OP = re.compile(r"\bsubgroup[A-Z]\w*\s*\(|\bsubgroup_(size|invocation_id)\b")
_ShaderKey = tuple[str, tuple[tuple[str, str], ...], tuple[str, ...]]


@dataclass(frozen=True)
class ShaderHandle:
    """A compiled shader plus this use's immediate values (the shader itself is shared)."""

    index: int
    immediates: tuple[ImmediateField, ...] = ()


@dataclass
class PlanBuilder:
    """Accumulates shaders (deduplicated by label and defs), tensors and ops for one model."""

    graph: IrGraph
    library: ShaderLibrary
    shaders: list[CompiledShader] = field(default_factory=list)
    tensors: dict[int, PlanTensor] = field(default_factory=dict)
    operations: list[PlannedOp] = field(default_factory=list)
    features: set[str] = field(default_factory=set)
    _shader_keys: dict[_ShaderKey, int] = field(default_factory=dict)
    _scratch_ids: int = 0
    _constants: dict[str, int] = field(default_factory=dict)  # key -> plan tensor id (negative)
    error_slots: list[ErrorSlot] = field(default_factory=list)
    _errors: PlanTensor | None = None  # the ERRORS tensor, created with the first slot

    def plan_tensor(self, tensor: TensorDef) -> PlanTensor:
        """The plan entry for `tensor`, created on first use with its role and upload data."""
        if tensor.id in self.tensors:
            return self.tensors[tensor.id]
        if isinstance(tensor.shape, Absent):
            raise PlanningError(f"tensor '{tensor.name}' is absent but a GPU step uses it")
        require_gpu_type(tensor.dtype, f"tensor '{tensor.name}'")
        role, data = self._role(tensor)
        if tensor.dtype == DataType.FLOAT16:
            self.features.add("shader-f16")
        entry = PlanTensor(tensor.id, tensor.name, tensor.dtype, tuple(tensor.shape.dims), role, data)
        self.tensors[tensor.id] = entry
        return entry

    def constant(self, key: str, value: TensorValue) -> PlanTensor:
        """A WEIGHT entry for host data no graph tensor holds; see `PlanCtx.constant`."""
        if key in self._constants:
            entry = self.tensors[self._constants[key]]
            if (entry.dtype, entry.dims) != (value.dtype, value.dims):
                raise PlanningError(
                    f"constant '{key}' is registered as {entry.dtype.name.lower()}{list(entry.dims)}; "
                    f"a second use asks for {value.dtype.name.lower()}{list(value.dims)} (derive keys from the content)"
                )
            return entry
        require_gpu_type(value.dtype, f"constant '{key}'")
        tensor_id = -1 - len(self._constants)  # graph ids are >= 0, so derived constants never collide
        entry = PlanTensor(tensor_id, key, value.dtype, value.dims, TensorRole.WEIGHT, value)
        self._constants[key] = tensor_id
        self.tensors[tensor_id] = entry
        return entry

    def error_slot(self, slot: ErrorSlot) -> tuple[BufferRef, int]:
        """A new slot in the plan's error word (one u32 buffer for the whole plan) and its index."""
        if self._errors is None:
            tensor_id = -1 - len(self._constants)  # registered like a constant, so later constants never collide
            self._constants[ERRORS_NAME] = tensor_id
            self._errors = PlanTensor(tensor_id, ERRORS_NAME, DataType.UINT32, (0,), TensorRole.ERRORS)
            self.tensors[tensor_id] = self._errors
        self.error_slots.append(slot)
        self._errors.dims = (ERROR_SLOT_WORDS * len(self.error_slots),)
        return BufferRef(tensor=self._errors.id), len(self.error_slots) - 1

    def _role(self, tensor: TensorDef) -> tuple[TensorRole, TensorValue | np.ndarray | None]:
        if tensor.kind is TensorKind.INPUT:
            return TensorRole.INPUT, None
        if tensor.id in self.graph.outputs and tensor.value is None:
            return TensorRole.OUTPUT, None
        if tensor.value is not None and tensor.value.dtype == object:
            return TensorRole.SYMBOLIC, tensor.value
        if tensor.value is not None:
            _check_int_range(tensor.name, tensor.dtype, tensor.value)
            role = TensorRole.OUTPUT if tensor.id in self.graph.outputs else TensorRole.WEIGHT
            if tensor.dtype.is_packed:  # folded 4-bit values are logical: back to their storage form
                return role, TensorValue(tensor.dtype, tensor.value.shape, pack_4bit(tensor.value), name=tensor.name)
            return role, tensor.value
        if tensor.initializer is not None:
            if tensor.dtype in _CARRIED_RANGE:
                _check_int_range(tensor.name, tensor.dtype, tensor.initializer.numpy())
            return TensorRole.WEIGHT, tensor.initializer
        return TensorRole.INTERMEDIATE, None

    def compile_shader(
        self,
        label: str,
        source: str,
        defs: Mapping[str, object],
        dims: Mapping[str, DimValue],
        immediates: Mapping[str, int] | None = None,
    ) -> ShaderHandle:
        """Preprocess once per (label, defs, symbolic dims); later uses only bring their immediates."""
        spec = shader_dims(label, defs, dims, immediates)
        key = (label, tuple(sorted((k, str(v)) for k, v in spec.defs.items())), spec.symbolic)
        if key not in self._shader_keys:
            text = declare_immediates(preprocess(source, spec.defs, label, self.library), spec.symbolic)
            if "enable f16;" in text:
                self.features.add("shader-f16")
            if _SUBGROUP_OP.search(text):  # naga takes subgroup builtins without an `enable`; the device needs it
                self.features.add("subgroup")
            self._shader_keys[key] = len(self.shaders)
            self.shaders.append(CompiledShader(label, text, "main", 4 * len(spec.symbolic)))
        return ShaderHandle(self._shader_keys[key], spec.fields)

    def new_scratch_id(self) -> int:
        self._scratch_ids += 1
        return self._scratch_ids

    def finish(self, dims: dict[str, int], metadata: dict[str, str]) -> CompiledModel:
        """The plan: graph inputs and outputs get entries even when no step touches them."""
        for t in (*self.graph.inputs, *self.graph.outputs):
            self.plan_tensor(self.graph.tensor(t))
        bindings = [
            SymbolicBinding(op_index, step_index, f)
            for op_index, op in enumerate(self.operations)
            for step_index, step in enumerate(op.steps)
            if isinstance(step, Dispatch)
            for f in step.immediates
        ]
        return CompiledModel(
            self.operations,
            self.shaders,
            self.tensors,
            list(self.graph.inputs),
            list(self.graph.outputs),
            bindings,
            dims=dict(dims),
            required_features=set(self.features),
            metadata=dict(metadata),
            constraints=list(self.graph.constraints),
            aliases={o: i for o, i in self.graph.aliases.items() if o in self.tensors and i in self.tensors},
            error_slots=list(self.error_slots),
            error_tensor=None if self._errors is None else self._errors.id,
            static_required=_static_required(self.graph, dims),
        )


def _static_required(graph: IrGraph, dims: Mapping[str, int]) -> dict[str, str]:
    """The graph's structure-setting dims (`CompiledModel.static_required`) the compile left symbolic, first
    node's reason first. Kept for nodes a later pass removed: the shapes they decided live on downstream."""
    required: dict[str, str] = {}
    for entry in graph.static_required.values():
        for name, why in entry.items():
            if name not in dims:
                required.setdefault(name, why)
    return dict(sorted(required.items()))


_CARRIED_RANGE = {DataType.INT64: np.iinfo(np.int32), DataType.UINT64: np.iinfo(np.uint32)}


def _check_int_range(name: str, dtype: DataType, value: np.ndarray) -> None:
    """int64 lives as i32 and uint64 as u32 on the GPU: refuse a constant that would wrap."""
    info = _CARRIED_RANGE.get(dtype)
    if info is not None and value.size and value.dtype != object:
        lo, hi = int(value.min()), int(value.max())
        if lo < info.min or hi > info.max:
            kind = dtype.name.lower()
            raise PlanningError(
                f"tensor '{name}': {kind} value range [{lo}, {hi}] is out of the 32-bit range Onyxia computes "
                f"in (the GPU holds {kind} as {dtype.wgsl}, [{info.min}, {info.max}])"
            )
