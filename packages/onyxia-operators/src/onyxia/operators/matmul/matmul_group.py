"""com.onyxia MatMulGroup and GatedMatMul: several products of one activation in one dispatch.

``MatMulGroup(a, w0, ..., wn-1) -> y0, ..., yn-1`` is ``y_s = a @ w_s`` (n <= 4), each w_s a 2-D [K, N_s] weight
bound on its own: the `GroupMatMuls` pass makes it from the q/k/v and gate/up projections of a decoder layer,
which on lavapipe cost a fixed overhead per dispatch each. With attribute ``bias=1`` the inputs are
``(a, w0, ..., wn-1, b0, ..., bn-1)`` and ``y_s = a @ w_s + b_s`` (b_s [N_s]): `FuseMatMulBias` folds the bias
Add of a projection (Qwen2's q/k/v) into its product's epilogue. ``GatedMatMul(a, w_gate, w_up)`` is
``act(a @ w_gate) * (a @ w_up)`` with attribute ``activation`` "gelu" (default; `approximate` as Gelu's) or
"silu" (``g * Sigmoid(g)``): the `FuseMlpGate` pass makes it from a gate/up group feeding an MLP's activation,
so the gate and the product are never stored.

`plan_weight_products` also plans MatMul by a compile-time weight (a group of one), so a group's outputs equal
the separate MatMuls' bit for bit. Compile-time weights are repacked into column panels (`weights`), which a
decode step (one row, the GEMV of each generated token) streams linearly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    PlanningError,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
    max_binding_bytes,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.elementwise.numpy_math import gelu, sigmoid
from onyxia.operators.layout import type_defs
from onyxia.operators.matmul.tiles import narrowed
from onyxia.operators.matmul.variants import labelled, planned_tiles, shared_a_defs
from onyxia.operators.matmul.weights import bind_panels, panel_columns, panels_fit
from onyxia.operators.rolled_loops import short_loop
from onyxia.operators.typesets import FLOATS

__all__ = ["MATMUL_GROUP", "MAX_SLOTS", "MatMulGroupOp", "gate_activation", "gated_numpy", "plan_weight_products"]

_SOURCE = load_wgsl(__package__, "matmul_group.wgsl")
MAX_SLOTS = 4  # weights per group: the shader's slots


@dataclass(frozen=True)
class MatMulGroupOp:
    gated: bool = False
    name: str = "MatMulGroup"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dtype, rows, ns = _checked(ctx, self.gated)
        return [TensorType(dtype, shape_of([*rows, n])) for n in ns[: 1 if self.gated else None]]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None:
            return None
        a, *weights = values
        count = len(weights) // 2 if ctx.attr_int("bias", 0) else len(weights)
        products = [np.matmul(a.astype(np.float32), w.astype(np.float32)).astype(a.dtype) for w in weights[:count]]
        if self.gated:
            return [gated_numpy(gate_activation(ctx), products[0], products[1])]
        return [p + b.astype(a.dtype) for p, b in zip(products, weights[count:])] or products

    def plan(self, ctx: PlanCtx) -> None:
        dtype, rows, ns = _checked(ctx, self.gated)
        k = ctx.input_dims(1)[0]
        if not isinstance(k, int):  # the weights are [K, N] data: only a symbolic a could make K symbolic
            raise ctx.error(f"input 1 has K = {k}; the weight products need a static K")
        for i, n in enumerate(ns, 1):
            # sized from the dims: asking `ctx.chunks` would put the graph tensor in the plan (and upload it)
            # beside the panels
            if k * n * dtype.gpu_numpy.itemsize > max_binding_bytes():
                raise PlanningError(
                    f"node '{ctx.node.name}' ({ctx.node.op_type}): input {i} exceeds one storage binding; "
                    "GroupMatMuls leaves such weights to MatMul, which splits them"
                )
        activation = gate_activation(ctx) if self.gated else None
        plan_weight_products(ctx, dims_product(rows), k, ns, activation, bias=bool(ctx.attr_int("bias", 0)))


def gate_activation(ctx: NodeCtx) -> str:
    """A gated product's activation as the shaders' ACTIVATION def: gelu_none, gelu_tanh or silu."""
    activation = ctx.attr_str("activation", "gelu")
    if activation == "silu":
        return "silu"
    approximate = ctx.attr_str("approximate", "none")
    if activation != "gelu" or approximate not in ("none", "tanh"):
        raise ctx.error(
            f"has activation '{activation}', approximate '{approximate}'; expected 'silu', or 'gelu' with 'none' | 'tanh'"
        )
    return f"gelu_{approximate}"


def gated_numpy(activation: str, gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """activation(gate) * up with the unfused graph's roundings (gate and up already stored)."""
    if activation == "silu":
        act = gate * sigmoid(gate).astype(gate.dtype)
    else:
        act = gelu(gate, activation.removeprefix("gelu_")).astype(gate.dtype)
    return act * up


def plan_weight_products(
    ctx: PlanCtx,
    m: SymbolicDim,
    k: int,
    ns: list[int],
    activation: str | None = None,
    *,
    bias: bool = False,
    transposed: bool = False,
) -> None:
    """Dispatch input 0 (as [m, k]) times inputs 1 .. len(ns) ([k, N_s] each) into outputs 0 .. len(ns) - 1 (with
    `bias`, plus inputs len(ns) + 1 .. 2 len(ns)), or with `activation` (a `gate_activation`) into output 0 as
    activation(a @ w0) * (a @ w1). `transposed`: the weights are [N_s, k] (Gemm's transB), which only panels
    (`panels_fit`) can take."""
    if m == 0:
        return  # an empty output
    dtype = ctx.input_dtype(0)
    panels = all(panels_fit(ctx, i, k, n) for i, n in enumerate(ns, 1))
    if transposed and not panels:
        raise PlanningError(f"node '{ctx.node.name}' ({ctx.node.op_type}): a transposed weight must fit panels")
    outputs = 1 if activation is not None else len(ns)
    biases = [f"BIAS{s}" for s in range(len(ns))] if bias else []
    names = ["A", *(f"W{s}" for s in range(len(ns))), *biases, *(f"Y{s}" for s in range(outputs))]
    defs: dict[str, object] = {**type_defs(T=dtype, Y_T=dtype), **{f"BIND_{name}": i for i, name in enumerate(names)}}
    defs["OTHER_SLOTS"] = " ".join(str(s) for s in range(1, len(ns)))  # the shader's `#for` list
    if panels:
        defs |= {"PANELS": True, "PANEL": panel_columns("matmul_group")}
    if activation is not None:
        defs |= {"GATED": True, "ACTIVATION": activation}
    if bias:
        defs["BIAS"] = True
    if k % 4 == 0:
        defs["A_VEC4"] = True  # rows start on vec4 boundaries: a is read four k at a time
    if short_loop(k, 4):
        defs["ROLLED_K"] = True  # its loop over K, four k a trip, stays a loop (rolled_loops)
    dims: dict[str, SymbolicDim] = {"M": m, "K": k, **{f"N{s}": n for s, n in enumerate(ns)}}
    weights = [
        bind_panels(ctx, i, k, n, transposed=transposed) if panels else ctx.input(i) for i, n in enumerate(ns, 1)
    ]
    reads = [ctx.input(0), *weights, *(ctx.input(1 + len(ns) + s) for s in range(len(biases)))]
    writes = [ctx.output(s) for s in range(outputs)]
    for planned, share in planned_tiles("matmul_gated" if activation is not None else "matmul_group", m):
        tile = narrowed(planned, max(ns))
        per_slot = [ceil_div(n, tile.columns_per_workgroup) for n in ns]
        starts = {f"G{s}": sum(per_slot[:s]) for s in range(1, len(ns))}
        groups = per_slot[0] if activation is not None else sum(per_slot)
        shader = ctx.compile_shader(
            labelled("matmul/matmul_group"),
            _SOURCE,
            {**defs, **tile.block_defs, **shared_a_defs(tile.rows)},
            dims | starts,
        )
        ctx.dispatch(shader, reads, writes, (groups * share, ceil_div(m, tile.rows_per_workgroup), 1))


def _checked(ctx: NodeCtx, gated: bool) -> tuple[DataType, list[SymbolicDim], list[int]]:
    """(dtype, a's leading dims, each weight's N), validated: a [..., K], 2-D weights [K, N_s] and (`bias=1`) a
    bias [N_s] per weight."""
    bias = ctx.attr_int("bias", 0)
    if bias and (gated or (ctx.num_inputs - 1) % 2):
        raise ctx.error(f"has bias=1 and {ctx.num_inputs} inputs; expected a MatMulGroup with a bias per weight")
    count = (ctx.num_inputs - 1) // (2 if bias else 1)
    if not 1 <= count <= MAX_SLOTS or (gated and count != 2):
        raise ctx.error(f"has {count} weights; expected {'2' if gated else f'1 to {MAX_SLOTS}'}")
    dtype = ctx.input_dtype(0)
    if dtype not in FLOATS or ctx.input_rank(0) < 2:
        raise ctx.error(f"input 0 must be a float tensor of rank >= 2, found {dtype.name.lower()}{ctx.input_shape(0)}")
    k = ctx.input_dims(0)[-1]
    ns = []
    for i in range(1, count + 1):
        dims = ctx.input_dims(i)
        if len(dims) != 2 or not isinstance(dims[1], int) or ctx.input_dtype(i) != dtype or dims[0] != k:
            raise ctx.error(
                f"input {i} has {ctx.input_dtype(i).name.lower()}{ctx.input_shape(i)}; expected {dtype.name.lower()}[{k}, N]"
            )
        ns.append(dims[1])
        b = count + i
        if bias and (list(ctx.input_dims(b)) != [dims[1]] or ctx.input_dtype(b) != dtype):
            raise ctx.error(
                f"input {b} has {ctx.input_dtype(b).name.lower()}{ctx.input_shape(b)}; expected {dtype.name.lower()}[{dims[1]}]"
            )
    if gated and ns[0] != ns[1]:
        raise ctx.error(f"gate and up weights have {ns[0]} and {ns[1]} columns; expected equal")
    return dtype, list(ctx.input_dims(0)[:-1]), ns


MATMUL_GROUP: dict[str, MatMulGroupOp] = {
    "MatMulGroup": MatMulGroupOp(),
    "GatedMatMul": MatMulGroupOp(gated=True, name="GatedMatMul"),
}
