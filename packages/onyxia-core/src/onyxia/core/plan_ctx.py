"""What an operator's `plan()` sees, and the builder that collects every op's steps into a plan.

The rule planning enforces for every shader: a static dim becomes a shader def (a literal the
compiler can unroll on), a symbolic dim becomes a field of the ``var<immediate>`` block and a
`SymbolicBinding`, so the runtime can patch it without recompiling. Operators name their dims
once (`compile_shader(..., dims={"N": n})`) and write ``#{N}`` in WGSL either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from onyxia.core.bindings import BufferRange, Chunk, max_binding_bytes, split_rows
from onyxia.core.context import NodeCtx
from onyxia.core.dtypes import DataType, require_gpu_type
from onyxia.core.errors import PlanningError, ShaderError
from onyxia.core.ir import IrGraph, IrNode, TensorDef, TensorKind
from onyxia.core.plan import (
    BindingDesc,
    BufferRef,
    CompiledModel,
    CompiledShader,
    CopyBuffer,
    Dispatch,
    ImmediateField,
    PlannedOp,
    PlanTensor,
    ScratchBufferDesc,
    SymbolicBinding,
    TensorRole,
)
from onyxia.core.shapes import Absent
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.core.values import TensorValue
from onyxia.core.wgsl import ShaderLibrary, preprocess

__all__ = ["IMMEDIATE_DECLARATION", "MAX_IMMEDIATE_BYTES", "PlanBuilder", "PlanCtx", "ShaderHandle", "ceil_div"]

MAX_IMMEDIATE_BYTES = 256  # lavapipe's limit, and the smallest any adapter we target has
IMMEDIATE_DECLARATION = "var<immediate> imm: Immediates;"


def ceil_div(a: SymbolicDim, b: int) -> SymbolicDim:
    return (a + (b - 1)) // b  # type: ignore[operator]


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
    _shader_keys: dict[tuple, int] = field(default_factory=dict)
    _scratch_ids: int = 0
    _constants: dict[str, int] = field(default_factory=dict)  # key -> plan tensor id (negative)

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

    def _role(self, tensor: TensorDef) -> tuple[TensorRole, object]:
        if tensor.kind is TensorKind.INPUT:
            return TensorRole.INPUT, None
        if tensor.id in self.graph.outputs and tensor.value is None:
            return TensorRole.OUTPUT, None
        if tensor.value is not None and tensor.value.dtype == object:
            return TensorRole.SYMBOLIC, tensor.value
        if tensor.value is not None:
            _check_int_range(tensor.name, tensor.dtype, tensor.value)
            return (TensorRole.OUTPUT if tensor.id in self.graph.outputs else TensorRole.WEIGHT), tensor.value
        if tensor.initializer is not None:
            if tensor.dtype == DataType.INT64:
                _check_int_range(tensor.name, tensor.dtype, tensor.initializer.numpy())
            return TensorRole.WEIGHT, tensor.initializer
        return TensorRole.INTERMEDIATE, None

    def compile_shader(
        self, label: str, source: str, defs: Mapping[str, object], dims: Mapping[str, DimValue]
    ) -> ShaderHandle:
        full_defs = dict(defs)
        flat = _flatten_dims(dims)
        symbolic = sorted(name for name, value in flat.items() if not isinstance(value, int))
        for name, value in dims.items():
            if isinstance(value, (int, SymbolicExpr)):
                full_defs[name] = _dim_text(name, value)
            else:  # a list of dims becomes a comma list, e.g. for array<u32, RANK>(#{OUT_DIMS})
                full_defs[name] = ", ".join(_dim_text(f"{name}_{i}", v) for i, v in enumerate(value)) or "0u"
        fields = tuple(ImmediateField(name, 4 * i, flat[name]) for i, name in enumerate(symbolic))
        if 4 * len(fields) > MAX_IMMEDIATE_BYTES:
            raise PlanningError(
                f"shader '{label}': {len(fields)} symbolic dims exceed {MAX_IMMEDIATE_BYTES} B of immediates"
            )
        key = (label, tuple(sorted((k, str(v)) for k, v in full_defs.items())), tuple(symbolic))
        if key not in self._shader_keys:
            text = preprocess(source, full_defs, label, self.library)
            text = _declare_immediates(text, symbolic)
            if "enable f16;" in text:
                self.features.add("shader-f16")
            self._shader_keys[key] = len(self.shaders)
            self.shaders.append(CompiledShader(label, text, "main", 4 * len(symbolic)))
        return ShaderHandle(self._shader_keys[key], fields)

    def new_scratch_id(self) -> int:
        self._scratch_ids += 1
        return self._scratch_ids

    def finish(self, dims: dict[str, int], metadata: dict[str, str]) -> CompiledModel:
        for t in (*self.graph.inputs, *self.graph.outputs):
            self.plan_tensor(self.graph.tensor(t))
        bindings = [
            SymbolicBinding(op_index, step_index, f)
            for op_index, op in enumerate(self.operations)
            for step_index, step in enumerate(op.steps)
            if isinstance(step, Dispatch)
            for f in step.immediates
        ]
        model = CompiledModel(
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
        )
        return model


class PlanCtx(NodeCtx):
    """One node's planning view: buffer refs for its tensors and the step emitters."""

    def __init__(self, builder: PlanBuilder, node: IrNode) -> None:
        super().__init__(builder.graph, node)
        self.builder = builder
        self.op = PlannedOp(node.name, node.op_type)

    # ----- buffers ---------------------------------------------------------------------------
    def input(self, i: int) -> BufferRef:
        return BufferRef(tensor=self.builder.plan_tensor(self.input_tensor(i)).id)

    def output(self, i: int) -> BufferRef:
        return BufferRef(tensor=self.builder.plan_tensor(self.output_tensor(i)).id)

    def output_dims(self, i: int = 0) -> tuple[SymbolicDim, ...]:
        shape = self.output_tensor(i).shape
        if isinstance(shape, Absent):
            raise PlanningError(f"node '{self.node.name}': output {i} is absent")
        return shape.dims

    def static_dims(self, i: int) -> tuple[int, ...]:
        """Input `i`'s dims, all known; a `PlanningError` if any is symbolic."""
        dims = self.input_dims(i)
        if not all(isinstance(d, int) for d in dims):
            raise PlanningError(
                f"node '{self.node.name}' ({self.node.op_type}): input {i} needs static dims, found {list(map(str, dims))}"
            )
        return dims  # type: ignore[return-value]

    def symbolic_dims(self, i: int) -> list[str]:
        """Names of the symbols input `i`'s shape depends on."""
        names: set[str] = set()
        for d in self.input_dims(i):
            if isinstance(d, SymbolicExpr):
                names |= d.names()
        return sorted(names)

    def constant(self, key: str, value: TensorValue | np.ndarray) -> BufferRef:
        """A read-only GPU buffer holding host data the operator derived from its inputs.

        For weights an op wants in another layout than the graph stores them: MatMulNBits binds its
        packed 4-bit uint8 weights as u32 words, where the graph tensor would widen every byte to a
        u32. Pass a lazy `TensorValue` (a loader that repacks `tensor.initializer.numpy()`) so the
        work and the memory happen at upload, tensor by tensor, not at compile time. The data is
        uploaded once, like an initializer, in `value.dtype`'s GPU storage form.

        `key` is the plan tensor's name and deduplicates: nodes asking for the same key share one
        buffer, so derive it from the source tensor and the transform (``"<weight>:u32"``). The graph
        tensor the data came from is not uploaded unless some step binds it with `input()`.
        """
        if isinstance(value, np.ndarray):
            value = TensorValue.from_numpy(value, name=key)
        return BufferRef(tensor=self.builder.constant(key, value).id)

    def chunks(self, i: int, row_bytes: int) -> list[Chunk]:
        """Input `i` as rows of `row_bytes`, in ranges that each fit one storage binding.

        One whole-input chunk when it fits (or its size is symbolic); otherwise the op emits one
        dispatch per chunk, binding it with `input_chunk` (see `onyxia.core.bindings`)."""
        nbytes = self.builder.plan_tensor(self.input_tensor(i)).nbytes
        if not isinstance(nbytes, int):
            return [Chunk(0, None, 0, nbytes // row_bytes)]  # type: ignore[operator]
        where = f"node '{self.node.name}' ({self.node.op_type}): input {i}"
        return split_rows(nbytes // row_bytes, row_bytes, max_binding_bytes(), where)

    def input_chunk(self, i: int, chunk: Chunk) -> BufferRange:
        return BufferRange(self.input(i), chunk.offset, chunk.size)

    def shares_storage(self, input_index: int, output_index: int) -> bool:
        """True when output `output_index` lives in input `input_index`'s buffer (a KV cache the
        session updates in place): the op must then write only the new part."""
        if not (self.has_input(input_index) and self.has_output(output_index)):
            return False
        out, inp = self.node.outputs[output_index], self.node.inputs[input_index]
        return self.graph.aliases.get(out) == inp  # type: ignore[arg-type]

    def alloc_scratch(self, size: SymbolicDim, label: str) -> BufferRef:
        desc = ScratchBufferDesc(self.builder.new_scratch_id(), size, f"{self.node.name}/{label}")
        self.op.scratch.append(desc)
        return BufferRef(scratch=desc.id)

    # ----- steps -----------------------------------------------------------------------------
    def compile_shader(
        self,
        label: str,
        source: str,
        defs: Mapping[str, object] | None = None,
        dims: Mapping[str, DimValue] | None = None,
    ) -> ShaderHandle:
        """Preprocess `source` with `defs`; each entry of `dims` (a dim or a list of dims) becomes
        a literal def when static or an immediate field when symbolic, written ``#{NAME}``."""
        try:
            return self.builder.compile_shader(label, source, defs or {}, dims or {})
        except ShaderError as e:
            raise ShaderError(f"node '{self.node.name}' ({self.node.op_type}): {e}") from e

    def dispatch(
        self,
        shader: ShaderHandle,
        reads: Sequence[BufferRef | BufferRange],
        writes: Sequence[BufferRef | BufferRange],
        workgroups: SymbolicDim | Sequence[SymbolicDim],
    ) -> Dispatch:
        """Bindings are numbered reads first, then writes (the order the shader declares them)."""
        bindings = [_binding(i, ref, True) for i, ref in enumerate(reads)]
        bindings += [_binding(len(reads) + i, ref, False) for i, ref in enumerate(writes)]
        wg = (workgroups,) if isinstance(workgroups, (int, SymbolicExpr)) else tuple(workgroups)
        wg3 = (wg + (1, 1, 1))[:3]
        step = Dispatch(shader.index, bindings, wg3, list(shader.immediates))  # type: ignore[arg-type]
        self.op.steps.append(step)
        return step

    def copy(
        self,
        src: BufferRef,
        dst: BufferRef,
        size: SymbolicDim,
        src_offset: SymbolicDim = 0,
        dst_offset: SymbolicDim = 0,
    ) -> None:
        self.op.steps.append(CopyBuffer(src, dst, size, src_offset, dst_offset))


DimValue = SymbolicDim | Sequence[SymbolicDim]


def _binding(index: int, ref: BufferRef | BufferRange, read_only: bool) -> BindingDesc:
    if isinstance(ref, BufferRange):
        return BindingDesc(index, ref.ref, read_only, ref.offset, ref.size)
    return BindingDesc(index, ref, read_only)


def _flatten_dims(dims: Mapping[str, DimValue]) -> dict[str, SymbolicDim]:
    flat: dict[str, SymbolicDim] = {}
    for name, value in dims.items():
        if isinstance(value, (int, SymbolicExpr)):
            flat[name] = value
        else:
            flat.update({f"{name}_{i}": v for i, v in enumerate(value)})
    return flat


def _dim_text(name: str, value: SymbolicDim) -> str:
    """A u32 literal, or the immediate field; negative offsets (pads, steps) travel as bit patterns
    that shaders read back with ``bitcast<i32>``."""
    if isinstance(value, int):
        return f"{value}u" if value >= 0 else f"bitcast<u32>({value}i)"
    return f"imm.{name}"


def _declare_immediates(text: str, names: Sequence[str]) -> str:
    if not names:
        return text
    decl = "struct Immediates { " + " ".join(f"{n}: u32," for n in names) + " }\n" + IMMEDIATE_DECLARATION
    lines = text.split("\n")
    last_enable = max((i for i, line in enumerate(lines) if line.strip().startswith("enable ")), default=-1)
    lines.insert(last_enable + 1, decl)
    return "\n".join(lines)


def _check_int_range(name: str, dtype: DataType, value: np.ndarray) -> None:
    """int64 lives as i32 on the GPU: refuse a constant that would wrap."""
    if dtype == DataType.INT64 and value.size and value.dtype != object:
        lo, hi = int(value.min()), int(value.max())
        info = np.iinfo(np.int32)
        if lo < info.min or hi > info.max:
            raise PlanningError(f"tensor '{name}': int64 value range [{lo}, {hi}] does not fit the GPU's i32 storage")
