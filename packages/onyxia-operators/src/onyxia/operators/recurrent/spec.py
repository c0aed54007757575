"""What one LSTM/GRU/RNN node computes, read and checked once from its attributes and input shapes.

`Cell` is the per-op row (gate count, default activations, which inputs carry states and
peepholes); `RecurrentSpec` is the node: directions, hidden size, layout and the dims X gives
(seq_length and batch_size may be symbolic; input_size and everything the weights give should be
static, but a symbolic one is passed to the shaders as an immediate). Every check names the node
and the input by its ONNX name, so a mis-shaped export is told which tensor is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import DataType, NodeCtx, SymbolicDim

__all__ = ["INPUT_NAMES", "Cell", "RecurrentSpec", "read_spec"]

INPUT_NAMES = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
_FLOATS = (DataType.FLOAT,)


@dataclass(frozen=True)
class Cell:
    """One recurrent op: `kind` picks the shader's cell (def CELL_<kind>), `gates` its W/R row blocks."""

    kind: str
    gates: int
    activations: tuple[str, ...]  # defaults for one direction, in the order f, g, h
    has_cell_state: bool = False  # LSTM: initial_c input, Y_c output, peepholes


@dataclass(frozen=True)
class RecurrentSpec:
    cell: Cell
    directions: int
    hidden: int
    layout: int
    seq: SymbolicDim
    batch: SymbolicDim
    input_size: SymbolicDim
    reverse: str  # WGSL bool expression of the direction index d: is this direction run backwards?

    @property
    def quads(self) -> int:
        """Groups of four hidden units: the kernels' vec4 lanes (the last one padded)."""
        return (self.hidden + 3) // 4

    @property
    def gate_rows(self) -> int:
        return self.cell.gates * self.hidden

    def state_dims(self) -> tuple[SymbolicDim, ...]:
        """initial_h, initial_c, Y_h and Y_c: [directions, batch, hidden], batch first in layout 1."""
        d, b, h = self.directions, self.batch, self.hidden
        return (b, d, h) if self.layout else (d, b, h)

    def y_dims(self) -> tuple[SymbolicDim, ...]:
        s, d, b, h = self.seq, self.directions, self.batch, self.hidden
        return (b, s, d, h) if self.layout else (s, d, b, h)


def read_spec(ctx: NodeCtx, cell: Cell) -> RecurrentSpec:
    direction = ctx.attr_str("direction", "forward")
    if direction not in _DIRECTIONS:
        raise ctx.error(f"attribute direction is '{direction}'; expected one of {sorted(_DIRECTIONS)}")
    layout = ctx.attr_int("layout", 0)
    if layout not in (0, 1):
        raise ctx.error(f"attribute layout is {layout}; expected 0 or 1")
    _check_dtypes(ctx, cell)
    x = _rank(ctx, 0, 3)
    seq, batch, input_size = (x[1], x[0], x[2]) if layout else x
    directions = _DIRECTIONS[direction]
    hidden = _hidden_size(ctx)
    reverse = {"forward": "false", "reverse": "true", "bidirectional": "d == 1u"}[direction]
    spec = RecurrentSpec(cell, directions, hidden, layout, seq, batch, input_size, reverse)
    _check_shapes(ctx, spec)
    return spec


def _hidden_size(ctx: NodeCtx) -> int:
    """The hidden_size attribute, else R's last dim (the attribute is optional in the schema)."""
    if ctx.attr("hidden_size", None) is not None:
        hidden = ctx.attr_int("hidden_size")
    else:
        last = _rank(ctx, 2, 3)[2]
        if not isinstance(last, int):
            raise ctx.error("attribute hidden_size is missing and R's last dim is symbolic; expected one of them")
        hidden = last
    if hidden <= 0:
        raise ctx.error(f"attribute hidden_size is {hidden}; expected a positive number")
    return hidden


def _check_dtypes(ctx: NodeCtx, cell: Cell) -> None:
    dtype = ctx.input_dtype(0)
    if dtype not in _FLOATS:
        raise ctx.error(f"input 0 (X) is {dtype.name.lower()}; expected float32 (the recurrent kernels compute in f32)")
    for i, name in enumerate(INPUT_NAMES):
        if i == 0 or not ctx.has_input(i):
            continue
        if i >= 6 and not cell.has_cell_state:
            raise ctx.error(f"input {i} ({name}) is given, but {ctx.node.op_type} has only 6 inputs")
        expected = DataType.INT32 if name == "sequence_lens" else dtype
        if ctx.input_dtype(i) != expected:
            found = ctx.input_dtype(i).name.lower()
            raise ctx.error(f"input {i} ({name}) is {found}; expected {expected.name.lower()}")


def _rank(ctx: NodeCtx, i: int, rank: int) -> tuple[SymbolicDim, ...]:
    dims = ctx.input_dims(i)
    if len(dims) != rank:
        raise ctx.error(f"input {i} ({INPUT_NAMES[i]}) has rank {len(dims)}; expected {rank}")
    return dims


def _check_shapes(ctx: NodeCtx, spec: RecurrentSpec) -> None:
    """Every static dim against what X, the attributes and the op fix (symbolic ones are trusted)."""
    d, rows, h = spec.directions, spec.gate_rows, spec.hidden
    expected: dict[int, tuple[SymbolicDim, ...]] = {
        1: (d, rows, spec.input_size),
        2: (d, rows, h),
        3: (d, 2 * rows),
        4: (spec.batch,),
        5: spec.state_dims(),
        6: spec.state_dims(),
        7: (d, 3 * h),
    }
    for i, dims in expected.items():
        if not ctx.has_input(i):
            continue
        found = _rank(ctx, i, len(dims))
        for axis, (f, e) in enumerate(zip(found, dims)):
            if isinstance(f, int) and isinstance(e, int) and f != e:
                raise ctx.error(
                    f"input {i} ({INPUT_NAMES[i]}) has shape {_text(found)}; expected dim {axis} to be {e} "
                    f"(shape {_text(dims)} for {d} direction(s), hidden_size {h}, layout {spec.layout})"
                )


def _text(dims: tuple[SymbolicDim, ...]) -> str:
    return f"[{', '.join(map(str, dims))}]"
