"""`RecurrentOp`: ONNX LSTM, GRU and RNN (every opset), with the time loop on the GPU.

The plan is a fixed list of up to five dispatches whatever the sequence length: PACK rewrites W and
R so that neighbouring invocations read neighbouring words (on the host, once, when both are known at compile
time, as exported weights are), PROJECT computes X . W^T + biases for
every step at once (data-parallel over the whole GPU), PREP moves initial states in
(recurrent_io.wgsl), RECUR runs one persistent workgroup per (direction, batch entry) that walks the
steps inside the shader with storage barriers between them (recurrent.wgsl), and FINISH moves the
final states out. One dispatch per step was the alternative; it needs the step count when the plan
is made, so a symbolic seq_length (a speech model's frame count) would need a plan per length, and
each step would pay a dispatch. The persistent loop reads its bound from the seq_length immediate
(or the entry's sequence_lens value), so one plan serves every length and nothing is read back.

Both layouts, both directions, the activations and their alpha/beta (`activations`), clip,
input_forget, linear_before_reset, sequence_lens (checked on the GPU: a value outside
[0, seq_length] is a run-time error naming the node, as onnxruntime rejects it), initial_h/initial_c,
peepholes and every optional output are handled; the results are onnxruntime's (tests/test_recurrent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    TensorType,
    TensorValue,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.plan import BufferRef
from onyxia.core.plan_builder import ShaderHandle
from onyxia.core.shader_dims import DimValue
from onyxia.core.shapes import Absent, dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal
from onyxia.operators.recurrent.activations import activation_expressions
from onyxia.operators.recurrent.spec import Cell, RecurrentSpec, read_spec

__all__ = ["RECURRENT", "RecurrentOp"]

_LOOP_SOURCE = load_wgsl(__package__, "recurrent.wgsl")  # RECUR
_IO_SOURCE = load_wgsl(__package__, "recurrent_io.wgsl")  # PACK, PROJECT, PREP, FINISH
_OUTPUT_NAMES = ("Y", "Y_h", "Y_c")
# Batch entries per time-loop workgroup: each packed R read serves them all (the loop is bound by those
# reads on lavapipe); 4 keeps a cell's accumulators (4 entries x 4 gates x vec4) in registers' reach.
_BATCH_TILE = 4


@dataclass(frozen=True)
class RecurrentOp:
    name: str
    cell: Cell

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        spec = read_spec(ctx, self.cell)
        _cell_defs(ctx, spec)  # attribute errors surface at load, not at planning
        limit = 3 if self.cell.has_cell_state else 2
        if ctx.num_outputs > limit:
            raise ctx.error(
                f"{ctx.num_outputs} outputs; {ctx.node.op_type} has at most {limit} ({_OUTPUT_NAMES[:limit]})"
            )
        dtype = ctx.input_dtype(0)
        shapes = [spec.y_dims(), spec.state_dims(), spec.state_dims()]
        return [
            TensorType(dtype, shape_of(shapes[i]) if ctx.has_output(i) else Absent()) for i in range(ctx.num_outputs)
        ]

    def try_fold(self, ctx: FoldCtx) -> Sequence[np.ndarray] | None:
        return None  # a recurrence over constants does not occur in exported models; it runs on the GPU

    def plan(self, ctx: PlanCtx) -> None:
        spec = read_spec(ctx, self.cell)
        cells = spec.directions * spec.batch * spec.hidden
        if spec.batch == 0:
            return  # every output is empty
        state = ctx.alloc_scratch(cells * 3 * 4, "state")  # h, c, r (.) h: recurrent.wgsl
        wt, rt = _plan_pack(ctx, spec)
        proj = _plan_projection(ctx, spec, wt)
        initial = _plan_prep(ctx, spec, state)
        _plan_recurrence(ctx, spec, proj, rt, state, initial)
        _plan_finish(ctx, spec, state)


def _base_defs(spec: RecurrentSpec) -> dict[str, object]:
    return {"CELL": spec.cell.kind, "LAYOUT": spec.layout}


def _dims(spec: RecurrentSpec) -> dict[str, DimValue]:
    """Sizes as u32 literals (or immediates: seq_length, batch, maybe input_size)."""
    sizes = {"D": spec.directions, "H": spec.hidden, "G": spec.cell.gates, "HQ": spec.quads, "GH": spec.gate_rows}
    return {"S": spec.seq, "B": spec.batch, "I": spec.input_size, **sizes}


def _compile(
    ctx: PlanCtx,
    stage: str,
    spec: RecurrentSpec,
    defs: dict[str, object],
    immediates: dict[str, int] | None = None,
    dims: dict[str, DimValue] | None = None,
) -> ShaderHandle:
    full = {**_base_defs(spec), stage: True, **defs}
    if stage != "RECUR":
        full["WORKGROUP_SIZE"] = WORKGROUP_SIZE
    source = _LOOP_SOURCE if stage == "RECUR" else _IO_SOURCE
    return ctx.compile_shader(f"recurrent/{stage.lower()}", source, full, {**_dims(spec), **(dims or {})}, immediates)


def _plan_pack(ctx: PlanCtx, spec: RecurrentSpec) -> tuple[BufferRef, BufferRef]:
    """W and R as [D, K, G, 4 * quads] (recurrent_io.wgsl PACK), read as vec4s of neighbouring units: packed on
    the host as they are uploaded when both are known at compile time (initializers, or folded as a
    DynamicQuantizeLSTM's dequantized weights are), else by the PACK dispatch on every run."""
    if isinstance(spec.input_size, int) and spec.input_size > 0 and all(_compile_time(ctx, i) for i in (1, 2)):
        return _host_packed(ctx, spec, 1, spec.input_size), _host_packed(ctx, spec, 2, spec.hidden)
    packed_row = spec.cell.gates * spec.quads * 4
    w_count = spec.directions * spec.input_size * packed_row
    wt = ctx.alloc_scratch(w_count * 4 + 16, "w_packed")  # + 16: input_size 0 leaves it empty
    rt = ctx.alloc_scratch(spec.directions * spec.hidden * packed_row * 4, "r_packed")
    count = w_count + spec.directions * spec.hidden * packed_row
    shader = _compile(ctx, "PACK", spec, {})
    ctx.dispatch(shader, [ctx.input(1), ctx.input(2)], [wt, rt], ceil_div(count, WORKGROUP_SIZE))
    return wt, rt


def _compile_time(ctx: PlanCtx, i: int) -> bool:
    tensor = ctx.input_tensor(i)
    return tensor.initializer is not None or tensor.value is not None


def _host_packed(ctx: PlanCtx, spec: RecurrentSpec, i: int, columns: int) -> BufferRef:
    """Input `i` (W [D, G*H, columns] or R [D, G*H, H]) as PACK lays it out, computed when the runtime uploads it."""
    tensor = ctx.input_tensor(i)
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    d, g, h, hp = spec.directions, spec.cell.gates, spec.hidden, spec.quads * 4

    def load() -> np.ndarray:
        data = source.numpy() if isinstance(source, TensorValue) else np.asarray(source)
        packed = np.zeros((d, columns, g, hp), np.float32)
        packed[..., :h] = data.astype(np.float32).reshape(d, g, h, columns).transpose(0, 3, 1, 2)
        return packed.reshape(-1)

    key = f"{tensor.name}:recurrent-packed"
    return ctx.constant(key, TensorValue(DataType.FLOAT, (d * columns * g * hp,), load, name=key))


def _plan_projection(ctx: PlanCtx, spec: RecurrentSpec, wt: BufferRef) -> BufferRef:
    """proj[d, t, b, n] = X[t, b] . W[d, n] + Wb[d, n] + Rb[d, n] (Rb except GRU's candidate rows under
    linear_before_reset, which the recurrence adds inside the reset product)."""
    count = dims_product([spec.directions, spec.seq, spec.batch, spec.cell.gates, spec.quads])
    proj = ctx.alloc_scratch(count * 16 + 16, "projection")  # + 16: never an empty binding (seq_length 0)
    lbr = spec.cell.kind == "GRU" and bool(ctx.attr_int("linear_before_reset", 0))
    defs: dict[str, object] = {"RB_GATES": 2 if lbr else spec.cell.gates}
    reads = [ctx.input(0), wt]
    if ctx.has_input(3):
        defs |= {"HAS_BIAS": True, "B_BIAS": len(reads)}
        reads.append(ctx.input(3))
    defs["B_PROJ"] = len(reads)
    if count != 0:  # seq_length 0: no step; the recurrence still writes the (zero) final states
        blocks = spec.directions * ceil_div(spec.seq * spec.batch, 4) * spec.cell.gates * spec.quads
        ctx.dispatch(_compile(ctx, "PROJECT", spec, defs), reads, [proj], ceil_div(blocks, WORKGROUP_SIZE))
    return proj


def _plan_prep(ctx: PlanCtx, spec: RecurrentSpec, state: BufferRef) -> bool:
    """Initial states into the state buffer; False (nothing dispatched) when neither is given."""
    given = [i for i in (5, 6) if ctx.has_input(i)]
    if not given:
        return False
    defs: dict[str, object] = {"INIT_H" if i == 5 else "INIT_C": True for i in given}
    reads = [ctx.input(i) for i in given]
    defs |= {"B_C0": len(reads) - 1, "B_STATE": len(reads)}
    cells = spec.directions * spec.batch * spec.hidden
    ctx.dispatch(_compile(ctx, "PREP", spec, defs), reads, [state], ceil_div(cells, WORKGROUP_SIZE))
    return True


def _plan_recurrence(
    ctx: PlanCtx, spec: RecurrentSpec, proj: BufferRef, rt: BufferRef, state: BufferRef, initial: bool
) -> None:
    defs = _cell_defs(ctx, spec)
    group = min(256, max(8, 1 << (spec.quads - 1).bit_length()))  # 8: one lavapipe SIMD row
    tile = min(_BATCH_TILE, spec.batch) if isinstance(spec.batch, int) else _BATCH_TILE
    quads = ceil_div(spec.quads, group)
    defs |= {"WG": group, "UPQ": quads, "BT": tile, "UPQ_BT": quads * tile, "REVERSE": spec.reverse}
    if initial:
        defs["INIT_STATE"] = True
    reads = _recur_reads(ctx, spec, defs, proj, rt)
    writes = [state]
    defs["B_STATE"] = len(reads)
    if ctx.has_output(0):
        defs |= {"HAS_Y": True, "B_Y": len(reads) + len(writes)}
        writes.append(ctx.output(0))
    immediates = None
    if ctx.has_input(4):
        errors = ctx.error_slot(f"sequence_lens (input 4): each must be in [0, seq_length {spec.seq}]")
        defs["ERRORS_BINDING"] = len(reads) + len(writes)
        writes.append(errors.ref)
        immediates = errors.immediates
    tiles = ceil_div(spec.batch, tile)
    shader = _compile(ctx, "RECUR", spec, defs, immediates, {"TILES": tiles})
    ctx.dispatch(shader, reads, writes, spec.directions * tiles)


def _recur_reads(
    ctx: PlanCtx, spec: RecurrentSpec, defs: dict[str, object], proj: BufferRef, rt: BufferRef
) -> list[BufferRef]:
    """The time loop's read bindings, numbering the optional ones in `defs`: GRU's Rb under
    linear_before_reset (zeros when B is absent), sequence_lens, peepholes."""
    reads = [proj, rt]
    if "LINEAR_BEFORE_RESET" in defs:
        defs["B_BIAS"] = len(reads)
        size = 2 * spec.directions * spec.gate_rows  # the key names the size: nodes of one size share it
        zeros = f"recurrent:zero_bias:{size}"
        reads.append(ctx.input(3) if ctx.has_input(3) else ctx.constant(zeros, np.zeros(size, np.float32)))
    for index, binding, flag in ((4, "B_LENS", "HAS_LENS"), (7, "B_P", "PEEPHOLE")):
        if ctx.has_input(index):
            defs |= {binding: len(reads), flag: True}
            reads.append(ctx.input(index))
    return reads


def _plan_finish(ctx: PlanCtx, spec: RecurrentSpec, state: BufferRef) -> None:
    outputs = [i for i in (1, 2) if ctx.has_output(i)]
    if not outputs:
        return
    defs: dict[str, object] = {("HAS_YH" if i == 1 else "HAS_YC"): True for i in outputs}
    defs |= {("B_YH" if i == 1 else "B_YC"): 1 + slot for slot, i in enumerate(outputs)}
    cells = spec.directions * spec.batch * spec.hidden
    shader = _compile(ctx, "FINISH", spec, defs)
    ctx.dispatch(shader, [state], [ctx.output(i) for i in outputs], ceil_div(cells, WORKGROUP_SIZE))


def _cell_defs(ctx: NodeCtx, spec: RecurrentSpec) -> dict[str, object]:
    """Activation expressions per direction and the cell's flags (clip, input_forget, linear_before_reset)."""
    exprs = activation_expressions(ctx, spec.cell.activations, spec.directions)
    defs: dict[str, object] = {}
    for slot, letter in enumerate("FGH"[: len(spec.cell.activations)]):
        defs |= {f"ACT_{letter}_0": exprs[0][slot], f"ACT_{letter}_1": exprs[-1][slot]}
    clip = ctx.attr("clip", None)
    if clip is not None:
        if float(clip) <= 0:
            raise ctx.error(f"attribute clip is {float(clip)}; expected a positive threshold")
        defs["CLIP"] = node_literal(ctx, DataType.FLOAT, float(clip), "attribute 'clip'")
    if spec.cell.has_cell_state and ctx.attr_int("input_forget", 0):
        defs["INPUT_FORGET"] = True
    if spec.cell.kind == "GRU" and ctx.attr_int("linear_before_reset", 0):
        defs["LINEAR_BEFORE_RESET"] = True
    return defs


RECURRENT: dict[str, RecurrentOp] = {
    "LSTM": RecurrentOp("LSTM", Cell("LSTM", 4, ("Sigmoid", "Tanh", "Tanh"), has_cell_state=True)),
    "GRU": RecurrentOp("GRU", Cell("GRU", 3, ("Sigmoid", "Tanh"))),
    "RNN": RecurrentOp("RNN", Cell("RNN", 1, ("Tanh",))),
}
