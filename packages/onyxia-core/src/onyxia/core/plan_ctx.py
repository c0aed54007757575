"""What an operator's `plan()` sees: one node's buffers and the emitters for its GPU steps.

`PlanCtx` adds to `NodeCtx` (the node's tensors, dtypes and attributes) what planning needs: buffer
refs that create plan tensors on first use, constants and scratch buffers, and `compile_shader`,
`dispatch` and `copy`, which append steps to this node's `PlannedOp`. Everything shared across nodes
lives in the `PlanBuilder`; how dims become defs or immediates is `onyxia.core.shader_dims`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core.bindings import BufferRange, Chunk, max_binding_bytes, max_buffer_bytes, split_pieces, split_rows
from onyxia.core.context import NodeCtx
from onyxia.core.errors import PlanningError, ShaderError
from onyxia.core.ir_records import IrNode
from onyxia.core.plan import BindingDesc, BufferRef, CopyBuffer, Dispatch, ErrorSlot, PlannedOp, ScratchBufferDesc
from onyxia.core.plan_builder import PlanBuilder, ShaderHandle
from onyxia.core.shader_dims import DimValue
from onyxia.core.shapes import Absent, static_dims
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.core.values import TensorValue
from onyxia.core.weight_pieces import gpu_nbytes, known_data, piece_value

__all__ = ["ErrorSlotUse", "PlanCtx"]


@dataclass(frozen=True)
class ResidentKv:
    """A resident KV cache input as an op binds it (`PlanCtx.resident_kv`)."""

    capacity: int  # rows per (slot, kv head)
    rows: BufferRef  # int32 [batch, 2]: per batch row, (slot, rows cached before this run)


@dataclass(frozen=True)
class ErrorSlotUse:
    """A node's error slot: the error word's buffer and the slot index its shader reports into."""

    ref: BufferRef
    index: int

    @property
    def immediates(self) -> dict[str, int]:
        return {"ERROR_SLOT": self.index}


class PlanCtx(NodeCtx):
    """One node's planning view: buffer refs for its tensors and the step emitters."""

    def __init__(self, builder: PlanBuilder, node: IrNode) -> None:
        super().__init__(builder.graph, node)
        self.builder = builder
        self.op = PlannedOp(node.name, node.op_type)
        self._error_slot: ErrorSlotUse | None = None

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
        static = static_dims(dims)
        if static is None:
            raise PlanningError(
                f"node '{self.node.name}' ({self.node.op_type}): input {i} needs static dims, found {list(map(str, dims))}"
            )
        return static

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
        dispatch per chunk, binding it with `input_chunk` (see `onyxia.core.bindings`). A compile-time
        input over the buffer limit comes in pieces, each its own buffer (`onyxia.core.weight_pieces`)."""
        tensor = self.input_tensor(i)
        nbytes = gpu_nbytes(tensor)
        if not isinstance(nbytes, int):
            return [Chunk(0, None, 0, nbytes // row_bytes)]
        where = f"node '{self.node.name}' ({self.node.op_type}): input {i}"
        if (
            nbytes > max_buffer_bytes()
            and known_data(tensor) is not None
            and row_bytes % tensor.dtype.gpu_numpy.itemsize == 0
        ):
            return split_pieces(nbytes // row_bytes, row_bytes, max_binding_bytes(), max_buffer_bytes(), where)
        return split_rows(nbytes // row_bytes, row_bytes, max_binding_bytes(), where)

    def input_chunk(self, i: int, chunk: Chunk) -> BufferRange:
        if chunk.piece is None:
            return BufferRange(self.input(i), chunk.offset, chunk.size)
        key, value = piece_value(self.input_tensor(i), chunk.piece)
        return BufferRange(self.constant(key, value), chunk.offset - chunk.piece.offset, chunk.size)

    def shares_storage(self, input_index: int, output_index: int) -> bool:
        """True when output `output_index` lives in input `input_index`'s buffer (a KV cache the
        session updates in place): the op must then write only the new part."""
        if not (self.has_input(input_index) and self.has_output(output_index)):
            return False
        out, inp = self.node.outputs[output_index], self.node.inputs[input_index]
        return out is not None and self.graph.aliases.get(out) == inp

    def resident_kv(self, i: int) -> ResidentKv | None:
        """How input `i` is stored when it is (or shares the buffer of) a session's resident KV cache:
        its row capacity and the per-row (slot, cached rows) table to bind; None for any other tensor.
        The op must then address rows as `onyxia.core.resident_kv` lays them out."""
        layout = self.graph.resident_kv
        if layout is None or not self.has_input(i):
            return None
        root = self.node.inputs[i]
        while root in self.graph.aliases:
            root = self.graph.aliases[root]
        if root not in layout.caches:
            return None
        rows = BufferRef(tensor=self.builder.plan_tensor(self.graph.tensor(layout.rows_input)).id)
        return ResidentKv(layout.capacity, rows)

    def error_slot(self, detail: str = "") -> ErrorSlotUse:
        """This node's slot in the plan's run-time error word (one per node, made on first use).

        A checking kernel imports ``onyxia::errors``, binds `ref` as its last write binding (def
        ``ERRORS_BINDING``) and passes `immediates` to `compile_shader`; the runtime reads the word
        back with the outputs and raises an `InputError` naming this node. `detail` (``"axis 0 of
        size 1024"``) completes the message."""
        if self._error_slot is None:
            ref, index = self.builder.error_slot(ErrorSlot(self.node.name, self.node.op_type, detail))
            self._error_slot = ErrorSlotUse(ref, index)
        return self._error_slot

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
        immediates: Mapping[str, int] | None = None,
    ) -> ShaderHandle:
        """Preprocess `source` with `defs`; each entry of `dims` (a dim or a list of dims) becomes
        a literal def when static or an immediate field when symbolic, written ``#{NAME}``;
        `immediates` always become fields (`ErrorSlotUse.immediates`)."""
        try:
            return self.builder.compile_shader(label, source, defs or {}, dims or {}, immediates)
        except (ShaderError, PlanningError) as e:  # a bad def or a dim beyond u32: name the node
            raise type(e)(f"node '{self.node.name}' ({self.node.op_type}): {e}") from e

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
        padded = (*wg, 1, 1)
        step = Dispatch(shader.index, bindings, (padded[0], padded[1], padded[2]), list(shader.immediates))
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


def _binding(index: int, ref: BufferRef | BufferRange, read_only: bool) -> BindingDesc:
    if isinstance(ref, BufferRange):
        return BindingDesc(index, ref.ref, read_only, ref.offset, ref.size)
    return BindingDesc(index, ref, read_only)
