"""The steps a plan is made of, and the buffers they name: plain data the runtime replays.

`Dispatch`, `CopyBuffer` and `WriteBuffer` are encoded into the run's command buffer; `ReadValues`
(and `RunSubplan`, in `onyxia.core.plan`) end a segment: the host acts between the steps before and after.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onyxia.core.symbolic import SymbolicDim

__all__ = ["BindingDesc", "BufferRef", "CopyBuffer", "Dispatch", "ImmediateField", "ReadValues", "WriteBuffer"]


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
