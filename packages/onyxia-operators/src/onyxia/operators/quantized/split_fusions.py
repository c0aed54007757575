"""Rewrite rule that splits a packed 4-bit projection into MatMulNBits siblings, which then group.

- ``split_packed_matmul_nbits``: ``Split(MatMulNBits(A, B, scales[, zero_points][, bias]), sizes, axis=-1)``
  with compile-time weights and sizes becomes one MatMulNBits per output, each reading its rows of B, scales,
  zero points and bias (MatMulNBits stores its weight as [N, blocks, blob], so output columns are weight
  rows: the cut is exact and the kernels see ordinary weights). `group_matmul_nbits`, in the same pass, then
  makes the siblings one MatMulNBitsGroup. onnxruntime-genai's int4 Qwen 3 and Gemma 3 export q/k/v as one
  ``qkv_proj`` product and a Split: three Split dispatches and a stored product per layer, which this
  removes. The row slices are lazy: a block is cut from the weight only when it is uploaded.

Declines (reason logged, graph unchanged): a g_idx input, a weight input not known at compile time, a
split that is not of the last axis or whose sizes are not constants summing to N (`split_columns`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from onyxia.core import IrGraph, IrNode, TensorKind, TensorValue
from onyxia.core.rewrite import Decline, Match, NewValue, Rewriter, Rule, is_folded
from onyxia.core.shapes import shape_of
from onyxia.operators.matmul.packed_fusions import split_columns

__all__ = ["SPLIT_PACKED_MATMUL_NBITS"]

_ROWS_BY_N = (1, 2, 3, 5)  # B, scales, zero_points, bias: each holds N rows (g_idx, input 4, declines)


class _SplitProduct:
    """A MatMulNBits whose one reader is a Split (input 0)."""

    anchors = frozenset({("com.microsoft", "MatMulNBits")})

    def match(self, graph: IrGraph, node: IrNode) -> Match | None:
        out = node.outputs[0]
        if out is None or is_folded(graph, node) or graph.is_graph_output(out) or out in graph.aliases.values():
            return None
        uses = [(n, i) for n, i in graph.tensor_consumers(out) if not is_folded(graph, n)]
        if len(uses) != 1 or (uses[0][0].domain, uses[0][0].op_type, uses[0][1]) != ("", "Split", 0):
            return None
        return Match(node, nodes=[node, uses[0][0]], split=uses[0][0])


def _source(graph: IrGraph, t: int) -> TensorValue | np.ndarray | None:
    tensor = graph.tensor(t)
    return tensor.initializer if tensor.initializer is not None else tensor.value


def _ranges(graph: IrGraph, m: Match) -> list[tuple[int, int]] | str:
    rank = len(graph.tensor(m.node.outputs[0]).dims)
    return split_columns(graph, m.split, rank, int(m.node.attributes["N"]))


def _check(graph: IrGraph, m: Match) -> Decline | None:
    node = m.node
    if len(node.inputs) > 4 and node.inputs[4] is not None:
        return Decline("the product has a g_idx input", node)
    for i in _ROWS_BY_N:
        t = node.inputs[i] if i < len(node.inputs) else None
        if t is not None and _source(graph, t) is None:
            return Decline(f"input {i} '{graph.tensor(t).name}' is not known at compile time", node)
    ranges = _ranges(graph, m)
    return Decline(ranges, m.split) if isinstance(ranges, str) else None


def _rows(source: TensorValue | np.ndarray, n: int, start: int, end: int) -> Callable[[], np.ndarray]:
    """Rows [start, end) of the N-row view of `source`, in its own rank (1-D scales stay 1-D)."""

    def load() -> np.ndarray:
        data = source.numpy() if isinstance(source, TensorValue) else np.asarray(source)
        rows = data.reshape(n, -1)[start:end]
        return np.ascontiguousarray(rows.reshape(-1) if data.ndim == 1 else rows.reshape(end - start, *data.shape[1:]))

    return load


def _split(r: Rewriter, m: Match) -> dict[int, NewValue]:
    graph, node = r.graph, m.node
    ranges = _ranges(graph, m)
    assert not isinstance(ranges, str)  # `_check` passed
    n = int(node.attributes["N"])
    replaced: dict[int, NewValue] = {}
    for output, (start, end) in zip(m.split.outputs, ranges, strict=True):
        inputs: list[int | None] = [node.inputs[0]]
        for i in range(1, len(node.inputs)):
            t = node.inputs[i]
            source = None if t is None or i not in _ROWS_BY_N else _source(graph, t)
            if t is None or source is None:
                inputs.append(t)
                continue
            tensor = graph.tensor(t)
            dims = list(source.dims if isinstance(source, TensorValue) else source.shape)
            dims[0] = dims[0] * (end - start) // n
            name = f"{tensor.name}/rows_{start}_{end}"
            value = TensorValue(tensor.dtype, tuple(dims), _rows(source, n, start, end), name=name)
            inputs.append(
                graph.add_tensor(name, tensor.dtype, shape_of(dims), TensorKind.INITIALIZER, initializer=value).id
            )
        attrs = {**node.attributes, "N": end - start}
        product = r.op("MatMulNBits", *inputs, domain="com.microsoft", name=f"{node.name}/{start}_{end}", **attrs)
        if output is not None:
            replaced[output] = product
    return replaced


SPLIT_PACKED_MATMUL_NBITS = Rule(
    "split_packed_matmul_nbits",
    _SplitProduct(),
    _split,
    check=_check,
    targets="onnxruntime-genai int4 Qwen 3 / Gemma 3: Split(MatMulNBits(x, qkv_proj), [q, k, v], axis=-1)",
)
