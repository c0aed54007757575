"""What a shape rule assumed about a run-time value, recorded for the runtime to check when it binds it.

Shape rules treat a symbolic entry as a size: a Reshape target entry is a dim (never the ``-1``
that infers one or the ``0`` that copies one), a Slice bound lies inside its axis and counts from
the start. Shape-derived values satisfy that by construction; values from a graph input
(`MarkValueInputsPass`) or read back from the GPU (ReadBack, NonZero's count) may not, and the plan cannot change its arithmetic at run time. So each
such assumption becomes a `ValueCheck` (expression >= minimum, naming node and input) that the
runtime evaluates as soon as the value is bound, before anything runs. The checks are recorded
right after shape inference, while the nodes are those the model wrote (fusions come later), and
`attach_value_inputs` puts them and the input elements' symbols into the compiled plan.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import numpy as np

from onyxia.compiler.passes.mark_value_inputs import MAX_VALUE_ELEMENTS, value_symbol_names
from onyxia.core import Absent, CompiledModel, IrGraph, IrNode, OperatorRegistry, Stage, SymbolicDim, SymbolicExpr
from onyxia.core.plan import HOST_STEPS
from onyxia.core.plan_values import ValueCheck, ValueFill, ValueSymbol

__all__ = ["RecordValueChecksPass", "attach_value_inputs"]

log = logging.getLogger(__name__)

_Rule = Callable[[IrGraph, IrNode, set[str], set[str]], Iterator[ValueCheck]]  # graph, node, symbols, covered
_FillRule = Callable[[IrGraph, IrNode, set[int]], Iterator[ValueFill]]  # graph, node, symbol sources


class RecordValueChecksPass:
    """Record what shape rules assumed about run-time values, for the runtime to check when it binds them.

    INFERENCE stage, after shape inference; keeps the checks of its latest run in `checks`."""

    name = "RecordValueChecks"
    stage = Stage.INFERENCE

    def __init__(self) -> None:
        self.checks: list[ValueCheck] = []
        self.fills: list[ValueFill] = []

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        sources = _symbol_sources(graph, registry)
        symbols = {str(v) for t in sources for v in np.asarray(graph.tensor(t).value).flat}
        self.checks, self.fills = [], []
        for node in graph.nodes if symbols else []:
            if node.domain not in ("", "ai.onnx") or node.op_type not in _RULES:
                continue
            fill_rule, check_rule = _RULES[node.op_type]
            fills = list(fill_rule(graph, node, sources)) if fill_rule is not None else []
            covered = {o for f in fills for o in f.operands if isinstance(o, str)}
            self.fills.extend(fills)
            self.checks.extend(check_rule(graph, node, symbols, covered))
        log.info("%s: %d run-time value checks, %d fills", self.name, len(self.checks), len(self.fills))
        return False


def attach_value_inputs(
    compiled: CompiledModel, graph: IrGraph, checks: list[ValueCheck], fills: list[ValueFill]
) -> None:
    """Record in `compiled` which input elements bind which symbols, and the checks on them.

    A dim equality a shape rule assumed (`CompiledModel.constraints`) that names a value symbol
    becomes a check too: such a symbol may size nothing in the plan (an Expand entry facing a
    static dim), so only the value binder, which binds every symbol, can evaluate it."""
    symbols = value_symbol_names(graph)
    compiled.value_symbols = [ValueSymbol(tid, index, name) for name, (tid, index) in symbols.items()]
    for tid in graph.inputs:  # inputs the plan was specialized for: the runtime watches their values
        name = graph.tensor(tid).name
        specialized = [(i, f"{name}[{i}]") for i in range(MAX_VALUE_ELEMENTS) if f"{name}[{i}]" in compiled.dims]
        compiled.value_symbols += [ValueSymbol(tid, i, symbol) for i, symbol in specialized]
    compiled.value_fills = list(dict.fromkeys(fills))
    runtime = set(symbols) | {
        s for op in compiled.operations for st in op.steps if isinstance(st, HOST_STEPS) for s in st.symbols
    }
    kept, moved = [], list(checks)
    for a, b, where in compiled.constraints:
        difference = SymbolicExpr.binary("-", a, b)
        if where.endswith("(Expand) broadcasting") and _runtime(b, runtime):
            # a target entry facing a data dim: Expand keeps the data dim, so 1 is as good as equal
            either = SymbolicExpr.binary("*", difference, SymbolicExpr.binary("-", b, 1))
            moved.append(ValueCheck(either, 0, f"{where}: '{b}' must equal '{a}' or 1", maximum=0))
        elif _runtime(a, runtime) or _runtime(b, runtime):
            moved.append(ValueCheck(difference, 0, f"{where}: '{a}' must equal '{b}'", maximum=0))
        else:
            kept.append((a, b, where))
    compiled.constraints, compiled.value_checks = kept, list(dict.fromkeys(moved))  # rounds repeat some


def _symbol_sources(graph: IrGraph, registry: OperatorRegistry) -> set[int]:
    """Tensors whose elements are run-time symbols at their source: marked graph inputs, and outputs
    of ops that bind their value by reading it back (`plans_folded`: ReadBack)."""
    sources = {tid for tid, _ in value_symbol_names(graph).values()}
    for node in graph.nodes:
        if getattr(registry.get(node.domain, node.op_type, node.opset), "plans_folded", False):
            for t in node.outputs:
                value = graph.tensor(t).value if t is not None else None
                if t is not None and value is not None and value.dtype == object:
                    sources.add(t)
    return sources


def _value(graph: IrGraph, node: IrNode, i: int) -> list[SymbolicDim] | None:
    if i >= len(node.inputs) or node.inputs[i] is None:
        return None
    value = graph.tensor(node.inputs[i]).value
    if value is None:
        return None
    return [v if isinstance(v, SymbolicExpr) else int(v) for v in np.asarray(value).reshape(-1)]


def _runtime(dim: SymbolicDim, symbols: set[str]) -> bool:
    return isinstance(dim, SymbolicExpr) and bool(dim.names() & symbols)


def _direct(graph: IrGraph, node: IrNode, i: int, sources: set[int]) -> list[str | int] | None:
    """Input `i`'s symbols when the input is their source (a marked graph input, a read-back) and only
    `node` reads it: then a fill may give them the meaning this node reads them with."""
    tid = node.inputs[i] if i < len(node.inputs) else None
    if tid is None or tid not in sources or len(graph.tensor_consumers(tid)) != 1:
        return None
    return [str(v) for v in np.asarray(graph.tensor(tid).value).reshape(-1)]


def _data_dims(graph: IrGraph, node: IrNode) -> tuple[SymbolicDim, ...] | None:
    shape = graph.tensor(node.inputs[0]).shape if node.inputs and node.inputs[0] is not None else Absent()
    return None if isinstance(shape, Absent) else tuple(shape.dims)


def _reshape_fills(graph: IrGraph, node: IrNode, sources: set[int]) -> Iterator[ValueFill]:
    target, dims = _direct(graph, node, 1, sources), _data_dims(graph, node)
    if target is not None and dims is not None:
        where = f"node '{node.name}' (Reshape): input 1 (shape)"
        yield ValueFill("reshape", tuple(target), dims, bool(node.attributes.get("allowzero", 0)), where)


def _slice_fills(graph: IrGraph, node: IrNode, sources: set[int]) -> Iterator[ValueFill]:
    """Per axis, (start, end) clamped as ONNX does over positive steps (`slot_role` refuses others)."""
    dims = _data_dims(graph, node)
    starts, ends = _direct_or_known(graph, node, 1, sources), _direct_or_known(graph, node, 2, sources)
    if dims is None or starts is None or ends is None:
        return
    axes = _value(graph, node, 3) or list(range(len(starts)))
    for start, end, axis in zip(starts, ends, axes):
        if not isinstance(axis, int) or not (isinstance(start, str) or isinstance(end, str)):
            continue
        dim = dims[axis + len(dims) if axis < 0 else axis]
        if _in_axis(start, dim) and _in_axis(_end(end), dim):  # a known bound the fill cannot move must fit
            yield ValueFill(
                "bounds", (start, _end(end)), (dim,), where=f"node '{node.name}' (Slice): bounds of axis {axis}"
            )


def _range_fills(graph: IrGraph, node: IrNode, sources: set[int]) -> Iterator[ValueFill]:
    start, limit = _direct_or_known(graph, node, 0, sources), _direct_or_known(graph, node, 1, sources)
    if start is not None and limit is not None and (isinstance(start[0], str) or isinstance(limit[0], str)):
        yield ValueFill("bounds", (start[0], limit[0]), where=f"node '{node.name}' (Range): start and limit")


def _direct_or_known(graph: IrGraph, node: IrNode, i: int, sources: set[int]) -> list[str | int] | None:
    values = _value(graph, node, i)
    known = [v for v in values or [] if isinstance(v, int)]
    if values is not None and len(known) == len(values):
        return list(known)
    return _direct(graph, node, i, sources)


def _in_axis(bound: str | int, dim: SymbolicDim) -> bool:
    """A symbol (clamped by the fill), "to the end", or a known bound inside a known axis."""
    return isinstance(bound, str) or bound == 2**31 - 1 or (isinstance(dim, int) and -dim <= bound <= dim)


def _end(end: str | int) -> str | int:
    return 2**31 - 1 if isinstance(end, int) and end >= 2**31 - 1 else end  # "to the end", clamped by the fill


def _sizes(index: int, what: str, minimum: Callable[[IrNode], int], note: str) -> _Rule:
    """Every run-time entry of input `index` is a size of at least `minimum(node)` (unless a fill made it one)."""

    def rule(graph: IrGraph, node: IrNode, symbols: set[str], covered: set[str]) -> Iterator[ValueCheck]:
        for i, dim in enumerate(_value(graph, node, index) or []):
            if _runtime(dim, symbols) and str(dim) not in covered:
                where = f"node '{node.name}' ({node.op_type}): input {index} ({what}) element {i}, {dim}{note}"
                yield ValueCheck(dim, minimum(node), where)

    return rule


def _slice(graph: IrGraph, node: IrNode, symbols: set[str], covered: set[str]) -> Iterator[ValueCheck]:
    """Run-time bounds are taken as 0 <= start <= end <= dim (`slicing._symbolic`) unless a fill clamps them."""
    starts, ends = _value(graph, node, 1) or [], _value(graph, node, 2) or []
    shape = graph.tensor(node.inputs[0]).shape if node.inputs[0] is not None else Absent()
    dims = () if isinstance(shape, Absent) else shape.dims
    axes = _value(graph, node, 3) or list(range(len(starts)))
    prefix = f"node '{node.name}' (Slice)"
    for start, end, axis in zip(starts, ends, axes):
        if not isinstance(axis, int) or not (_runtime(start, symbols) or _runtime(end, symbols)):
            continue
        if str(start) in covered or str(end) in covered:
            continue
        dim = dims[axis + len(dims) if axis < 0 else axis]
        what = f"{prefix}: slice [{start}:{end}] of axis {axis} (size {dim})"
        known_end = dim if isinstance(end, int) and end >= 2**31 - 1 else end
        yield ValueCheck(start, 0, f"{what}: a run-time start must be non-negative")
        yield ValueCheck(known_end - start, 0, f"{what}: a run-time end must not precede the start")
        yield ValueCheck(dim - known_end, 0, f"{what}: a run-time end must lie inside the axis")


def _range(graph: IrGraph, node: IrNode, symbols: set[str], covered: set[str]) -> Iterator[ValueCheck]:
    start, limit = (_value(graph, node, i) or [0] for i in (0, 1))
    if _runtime(start[0], symbols) or _runtime(limit[0], symbols):
        where = f"node '{node.name}' (Range): [{start[0]}, {limit[0]})"
        yield ValueCheck(start[0], 0, f"{where}: a run-time start must be non-negative (the kernel adds it as a u32)")
        if str(limit[0]) not in covered and str(start[0]) not in covered:
            yield ValueCheck(limit[0] - start[0], 0, f"{where}: a run-time limit must not precede the start")


_NOT_SPECIAL = ": a run-time entry is a size here (-1 and 0 are resolved only for a target straight from a graph input)"
_RULES: dict[str, tuple[_FillRule | None, _Rule]] = {
    "Reshape": (
        _reshape_fills,
        _sizes(1, "shape", lambda n: 0 if n.attributes.get("allowzero", 0) else 1, _NOT_SPECIAL),
    ),
    "Expand": (None, _sizes(1, "shape", lambda n: 0, "")),
    "ConstantOfShape": (None, _sizes(0, "input", lambda n: 0, "")),
    "Tile": (None, _sizes(1, "repeats", lambda n: 0, "")),
    "OneHot": (None, _sizes(1, "depth", lambda n: 1, "")),
    "Slice": (_slice_fills, _slice),
    "Range": (_range_fills, _range),
}
