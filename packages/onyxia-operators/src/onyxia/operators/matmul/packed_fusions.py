"""Rewrite rule that splits a packed projection into this family's MatMulGroup.

- ``split_packed_matmul``: ``MatMul(x, W)`` whose only readers are Slices of its last axis with compile-time
  bounds and step 1, disjoint and non-empty (2 to `MAX_SLOTS` of them), or one Split of its last axis with
  compile-time sizes (onnxruntime-genai's Gemma 3 and Qwen 3 fp32 ``qkv_proj``), becomes
  ``MatMulGroup(x, W[:, s0], W[:, s1], ...)``, one output per Slice, the weight columns cut at compile time
  (lazily: a column block is read from the weight only when uploaded). Targets Phi-3's optimum exports,
  whose attention multiplies by a packed ``qkv_proj`` and slices q, k and v out of the product, and whose
  MLP slices gate and up out of ``gate_up_proj`` (bounds from Shape/Gather/Div chains that constant
  folding has made constants): each Slice was a dispatch and a stored copy, and as a two-output group the
  MLP's ``silu(gate) * up`` becomes a GatedMatMul (`FuseMlpGate`), so neither half is stored. It runs in
  `GroupMatMuls`, before `group_matmuls` (a split group has several outputs and groups no further).

Declines (reason logged, graph unchanged): a weight that is not known at compile time, a Slice with bounds
that are not constants, of another axis or with a step other than 1, empty or overlapping column ranges,
more Slices than the group's slots or storage bindings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from onyxia.core import IrGraph, IrNode, TensorKind, TensorValue
from onyxia.core.rewrite import Decline, Match, NewValue, Rewriter, Rule, is_folded
from onyxia.core.shapes import shape_of
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.matmul.fusions import group_fits, weight_product
from onyxia.operators.matmul.matmul_group import MAX_SLOTS

__all__ = ["SPLIT_PACKED_MATMUL", "split_columns"]

_FITS = group_fits(2, 1)  # a weight and an output per slot, and the shared x
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, eq=False)
class _SlicedProduct:
    """A float MatMul by a [K, N] weight (`weight_product`) whose readers are Slices or one Split (`slices`
    then holds the Split), besides folded ones (the
    exporter's Shape of the product, already a constant: it needs no data, and `DeadCodeElimination` removes it
    and the MatMul once the Slices are gone)."""

    anchors = frozenset({("", "MatMul")})

    def match(self, graph: IrGraph, node: IrNode) -> Match | None:
        out = node.outputs[0]
        uses = [(n, i) for n, i in graph.tensor_consumers(out) if not is_folded(graph, n)] if out is not None else []
        split = len(uses) == 1 and (uses[0][0].domain, uses[0][0].op_type, uses[0][1]) == ("", "Split", 0)
        if not uses or not (split or all((n.domain, n.op_type, i) == ("", "Slice", 0) for n, i in uses)):
            return None
        if graph.is_graph_output(out) or out in graph.aliases.values() or not weight_product(graph, node):
            return None
        slices = sorted({n.id: n for n, _ in uses}.values(), key=graph.order_key)
        return Match(
            node, nodes=[node, *slices], slices=slices
        )  # the MatMul dies with the Slices if nothing else reads it


def _constant(graph: IrGraph, node: IrNode, index: int) -> list[int] | None:
    """Input `index` of `node` as a list of ints, [] when absent, None when not known at compile time."""
    if index >= len(node.inputs) or node.inputs[index] is None:
        return []
    tensor = graph.tensor(node.inputs[index])
    value = tensor.value if tensor.value is not None else tensor.initializer.numpy() if tensor.initializer else None
    if value is None or value.dtype == object:
        return None
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _columns(graph: IrGraph, node: IrNode, rank: int, n: int) -> tuple[int, int] | str:
    """The [start, end) columns `node` slices out of the product's last axis (n columns), or why not."""
    starts, ends, axes, steps = (_constant(graph, node, i) for i in (1, 2, 3, 4))
    if starts is None or ends is None or axes is None or steps is None:
        return f"'{node.name}' has bounds that are not compile-time constants"
    axes = axes or list(range(len(starts)))
    if len(starts) != 1 or len(ends) != 1 or len(axes) != 1 or axes[0] not in (-1, rank - 1):
        return f"'{node.name}' slices axes {axes}, not the last axis alone"
    if steps not in ([], [1]):
        return f"'{node.name}' has steps {steps}, not 1"
    start, end = (min(max(v + n if v < 0 else v, 0), n) for v in (starts[0], ends[0]))  # ONNX's clamping
    return (start, end) if start < end else f"'{node.name}' selects no column"


def _split_check(graph: IrGraph, m: Match) -> Decline | None:
    ranges = _ranges(graph, m)
    if isinstance(ranges, str):
        return Decline(ranges, m.node)
    if not 2 <= len(ranges) <= MAX_SLOTS or not _FITS([m.node] * len(ranges)):
        return Decline(f"{len(ranges)} column blocks do not fit one MatMulGroup ({MAX_SLOTS} slots)", m.node)
    ordered = sorted(ranges)
    if any(a[1] > b[0] for a, b in pairwise(ordered)):
        return Decline(f"the Slices' column ranges {ordered} overlap", m.node)
    weight = graph.tensor(m.node.inputs[1])
    if weight.initializer is None and weight.value is None:
        return Decline(f"the weight '{weight.name}' is not known at compile time", m.node)
    return None


def _weight_dims(graph: IrGraph, node: IrNode) -> tuple[int, int]:
    k, n = graph.tensor(node.inputs[1]).dims
    assert isinstance(k, int) and isinstance(n, int)  # `weight_product` matched a static [K, N]
    return k, n


def split_columns(graph: IrGraph, node: IrNode, rank: int, n: int) -> list[tuple[int, int]] | str:
    """The [start, end) columns of each output of a Split of the product's last axis, or why not."""
    axis = node.attributes.get("axis", 0)
    if axis not in (-1, rank - 1):
        return f"'{node.name}' splits axis {axis}, not the last axis"
    sizes = _constant(graph, node, 1) or list(node.attributes.get("split", []))
    outputs = len(node.outputs)
    if sizes is None or (not sizes and "num_outputs" not in node.attributes and n % outputs):
        return f"'{node.name}' has sizes that are not compile-time constants"
    if not sizes:  # equal parts, the last one smaller (opset 18's num_outputs)
        size = -(-n // outputs)
        sizes = [min(size, n - i * size) for i in range(outputs)]
    if len(sizes) != outputs or sum(sizes) != n or min(sizes) <= 0:
        return f"'{node.name}' splits {n} columns into {sizes} for {outputs} outputs"
    starts = np.cumsum([0, *sizes[:-1]]).tolist()
    return [(int(a), int(a) + b) for a, b in zip(starts, sizes)]


def _ranges(graph: IrGraph, m: Match) -> list[tuple[int, int]] | str:
    rank = len(graph.tensor(m.node.outputs[0]).dims)
    n = _weight_dims(graph, m.node)[1]
    if m.slices[0].op_type == "Split":
        return split_columns(graph, m.slices[0], rank, n)
    ranges = []
    for node in m.slices:
        columns = _columns(graph, node, rank, n)
        if isinstance(columns, str):
            return columns
        ranges.append(columns)
    return ranges


def _loader(weight: TensorValue | np.ndarray, start: int, end: int) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        data = weight.numpy() if isinstance(weight, TensorValue) else np.asarray(weight)
        block = np.ascontiguousarray(data[:, start:end])
        if isinstance(weight, TensorValue):
            weight.release()  # each block is its own upload; the source may be a mapped file
        return block

    return load


def _split(r: Rewriter, m: Match) -> dict[int, NewValue]:
    graph = r.graph
    ranges = _ranges(graph, m)
    assert not isinstance(ranges, str)  # `_split_check` passed
    weight = graph.tensor(m.node.inputs[1])
    source = weight.initializer if weight.initializer is not None else weight.value
    assert source is not None
    k = _weight_dims(graph, m.node)[0]
    blocks = []
    for start, end in ranges:
        name = f"{weight.name}/columns_{start}_{end}"
        value = TensorValue(weight.dtype, (k, end - start), _loader(source, start, end), name=name)
        shape = shape_of([k, end - start])
        blocks.append(graph.add_tensor(name, weight.dtype, shape, TensorKind.INITIALIZER, initializer=value).id)
    group = r.op("MatMulGroup", m.node.inputs[0], *blocks, domain=ONYXIA_DOMAIN, outputs=len(blocks), name=m.node.name)
    readers = m.slices[0].outputs if m.slices[0].op_type == "Split" else [s.outputs[0] for s in m.slices]
    return {t: out for t, out in zip(readers, r.outputs_of(group), strict=True) if t is not None}


SPLIT_PACKED_MATMUL = Rule(
    "split_packed_matmul",
    _SlicedProduct(),
    _split,
    check=_split_check,
    targets="optimum Phi-3: Slice(MatMul(x, qkv_proj), ...) x 3, Slice(MatMul(x, gate_up_proj), ...) x 2; genai: Split(MatMul(x, qkv_proj))",
)
