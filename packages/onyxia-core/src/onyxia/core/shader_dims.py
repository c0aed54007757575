"""How an operator's named dims reach its shader: a literal def when static, an immediate when symbolic.

A static dim becomes a shader def (a literal the compiler can unroll on); a symbolic dim becomes a
field of the ``var<immediate>`` block, so the runtime can patch it without recompiling. Operators
name their dims once (`compile_shader(..., dims={"N": n})`) and write ``#{N}`` in WGSL either way.
The block must fit lavapipe's 256 B, the smallest any adapter we target allows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from onyxia.core.errors import PlanningError
from onyxia.core.plan import ImmediateField
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.core.wgsl_literals import wgsl_dim

__all__ = [
    "IMMEDIATE_DECLARATION",
    "MAX_IMMEDIATE_BYTES",
    "DimValue",
    "ShaderDims",
    "declare_immediates",
    "shader_dims",
]

MAX_IMMEDIATE_BYTES = 256  # lavapipe's limit, and the smallest any adapter we target has
IMMEDIATE_DECLARATION = "var<immediate> imm: Immediates;"

DimValue = SymbolicDim | Sequence[SymbolicDim]


@dataclass(frozen=True)
class ShaderDims:
    """`defs` to preprocess with; `symbolic` names the immediates in block order, `fields` their values."""

    defs: dict[str, object]
    symbolic: tuple[str, ...]
    fields: tuple[ImmediateField, ...]


def shader_dims(
    label: str, defs: Mapping[str, object], dims: Mapping[str, DimValue], immediates: Mapping[str, int] | None = None
) -> ShaderDims:
    """Merge `dims` into `defs`: each dim's def is a u32 literal or ``imm.<NAME>``.

    A list of dims becomes a comma list (``#{OUT_DIMS}`` in ``array<u32, RANK>(#{OUT_DIMS})``) whose
    elements are named ``<NAME>_<i>`` when they go to the immediate block. `immediates` go to the
    block although they are known (a node's error slot), so nodes differing only in them share a shader."""
    full_defs = dict(defs)
    flat = _flatten_dims(dims)
    pinned = dict(immediates or {})
    if pinned.keys() & (flat.keys() | full_defs.keys()):
        raise PlanningError(f"shader '{label}': {sorted(pinned)} are given both as immediates and as dims or defs")
    flat.update(pinned)
    full_defs.update({name: f"imm.{name}" for name in pinned})
    symbolic = tuple(sorted(name for name, value in flat.items() if not isinstance(value, int) or name in pinned))
    for name, value in dims.items():
        if isinstance(value, (int, SymbolicExpr)):
            full_defs[name] = _dim_text(label, name, value)
        else:
            full_defs[name] = ", ".join(_dim_text(label, f"{name}_{i}", v) for i, v in enumerate(value)) or "0u"
    fields = tuple(ImmediateField(name, 4 * i, flat[name]) for i, name in enumerate(symbolic))
    if 4 * len(fields) > MAX_IMMEDIATE_BYTES:
        raise PlanningError(
            f"shader '{label}': {len(fields)} symbolic dims exceed {MAX_IMMEDIATE_BYTES} B of immediates"
        )
    return ShaderDims(full_defs, symbolic, fields)


def declare_immediates(text: str, names: Sequence[str]) -> str:
    """Insert the ``Immediates`` struct after the last ``enable`` line (WGSL wants enables first)."""
    if not names:
        return text
    decl = "struct Immediates { " + " ".join(f"{n}: u32," for n in names) + " }\n" + IMMEDIATE_DECLARATION
    lines = text.split("\n")
    last_enable = max((i for i, line in enumerate(lines) if line.strip().startswith("enable ")), default=-1)
    lines.insert(last_enable + 1, decl)
    return "\n".join(lines)


def _flatten_dims(dims: Mapping[str, DimValue]) -> dict[str, SymbolicDim]:
    flat: dict[str, SymbolicDim] = {}
    for name, value in dims.items():
        if isinstance(value, (int, SymbolicExpr)):
            flat[name] = value
        else:
            flat.update({f"{name}_{i}": v for i, v in enumerate(value)})
    return flat


def _dim_text(label: str, name: str, value: SymbolicDim) -> str:
    """A u32 literal (`wgsl_dim`: a dim beyond u32 is refused here, not at load), or the immediate
    field; negative offsets (pads, steps) travel as bit patterns shaders read with ``bitcast<i32>``."""
    if isinstance(value, int):
        return wgsl_dim(value, f"shader '{label}': dim {name}")
    return f"imm.{name}"
