"""The ONNX backend node cases (`onnx.backend.test.case.node`), run through Onyxia like a user's model.

A case is one node (or, for ``*_expanded``, that node's function body in primitive ops) with data
sets of inputs and expected outputs. It is *selected* when every op in its graph, its subgraphs and
its local functions is registered at the model's opset. A selected case goes file →
`load_and_parse_model` → compile → `load_model` → `run` and ends in one of four outcomes:

- ``passed``: every output of every data set matches (exact for ints and bools, NaN where NaN; float64,
  which the GPU computes as f32, at float32's tolerance);
- ``rejected (dtype)``: a graph input or output has no WebGPU storage type (bfloat16, float8,
  string, sequence ...). Such a case must fail at load/compile time with an `OnyxiaError`; if it
  compiles, or fails later or otherwise, it is ``failed``;
- ``rejected``: a compile-time `UnsupportedOpError`, or a `PlanningError` about a dtype without a
  WebGPU storage type, on a case listed in `EXPECTED` (an unlisted rejection is a failure);
- ``failed``: wrong values, or any other exception (its type and first line are kept).

Two modes. *Unbaked* (``run_case(case, bake=False)``) feeds every graph input at run time, exactly as
`onnx.backend.test` does. *Baked* (the default) is how exported models look: when compiling says an
input must be known at compile time (Reshape's shape, Reduce* axes, Slice starts ...), the harness
bakes graph inputs into initializers, last first, until it compiles, and records which
(`Outcome.baked`); a case with every input baked folds on the host and runs no GPU step. A case that
bakes nothing has the same outcome in both modes (`run_unbaked` reuses it), so the unbaked figure
costs only the baked cases' second compile.

Pass rates are over the *storable* cases (`Case.storable`): every graph input and output has a WebGPU
storage type, int4/uint4 counted as storable (they pack into u32 words, as MatMulNBits reads them),
so an int4 case Onyxia rejects by dtype counts against the rate.
"""

from __future__ import annotations

import re
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from oracle import TOLERANCE, assert_close, runtime

from onyxia.core import DataType, OnyxiaError, OperatorRegistry, PlanningError, ShapeInferenceError, UnsupportedOpError

__all__ = [
    "FAILED",
    "PASSED",
    "REJECTED",
    "REJECTED_DTYPE",
    "Case",
    "Outcome",
    "all_cases",
    "registry",
    "needs_constant",
    "run_case",
    "run_unbaked",
    "selected_cases",
]

PASSED, FAILED, REJECTED, REJECTED_DTYPE = "passed", "failed", "rejected", "rejected (dtype)"

_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")
# How operators say an input must be a constant: `require_value`'s "must be known at compile time"
# (ShapeInferenceError), or "expected a compile-time constant" (UnsupportedOpError).
_NEEDS_CONSTANT = re.compile(r"compile[ -]time")
# "node 'n' (Reshape, domain ai.onnx): input 1 (shape) must be known ..." -> Reshape, "1 (shape)"
_NAMED_INPUT = re.compile(r"\((\w+)(?:, domain [\w.]+)?\): .*?input (\d+ \([^)]*\))")
_PACKED = frozenset({DataType.INT4, DataType.UINT4})  # storable: packed into u32 words


@dataclass(frozen=True)
class Case:
    name: str
    op: str  # the op under test: the node's op, or for *_expanded the op whose function was expanded
    model: onnx.ModelProto
    data_sets: Sequence[tuple[Sequence[Any], Sequence[Any]]]
    rtol: float
    atol: float
    no_gpu_type: str | None  # "input 'x' is BFLOAT16" when a graph input/output has no WebGPU storage type
    storable: bool  # every graph input/output has a WebGPU storage type, int4/uint4 counted as storable


@dataclass(frozen=True)
class Outcome:
    status: str  # PASSED, FAILED, REJECTED or REJECTED_DTYPE
    detail: str = ""
    baked: tuple[str, ...] = ()  # graph inputs turned into initializers because Onyxia needs them at compile time


@cache
def registry() -> OperatorRegistry:
    from onyxia.operators import core_operator_registry

    return core_operator_registry()


@cache
def all_cases() -> tuple[Any, ...]:
    """Every node case the installed onnx ships (materialized once: ~5 s)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return tuple(collect_testcases(None))


def selected_cases(op: str | None = None, reg: OperatorRegistry | None = None) -> list[Case]:
    """Cases whose ops are all registered (optionally only those testing `op`), in onnx's order."""
    reg = reg or registry()
    base_op = {c.name: c.model.graph.node[0].op_type for c in all_cases() if not _EXPANDED.search(c.name)}
    selected = []
    for c in all_cases():
        case_op = base_op.get(_EXPANDED.sub("", c.name), c.model.graph.node[0].op_type)
        if (op is None or case_op == op) and _all_registered(c.model, reg):
            no_gpu = _no_gpu_type(c.model)
            storable = _no_gpu_type(c.model, _PACKED) is None
            selected.append(Case(c.name, case_op, c.model, c.data_sets, c.rtol, c.atol, no_gpu, storable))
    return selected


def run_case(case: Case, expected: Mapping[str, str] | None = None, *, bake: bool = True) -> Outcome:
    """Compile and run `case`; `expected` (default `EXPECTED`) decides whether a rejection is listed.
    With ``bake=False`` every graph input is fed at run time (the unbaked mode)."""
    if expected is None:
        from conformance.expected import EXPECTED as expected
    baked: list[str] = []
    try:
        compiled = _compile_baking(case, baked) if bake else _compile(case.model)
    except Exception as e:
        return _compile_failure(case, e, case.name in expected, tuple(baked))
    if case.no_gpu_type:
        return Outcome(FAILED, f"{case.no_gpu_type}, which has no WebGPU storage type, yet the model compiled")
    try:
        for i, (inputs, outputs) in enumerate(case.data_sets):
            if i and baked:  # each data set bakes its own values
                compiled = _compile(_bake(case.model, inputs, baked))
            if i == 0 or baked:
                executor = runtime().load_model(compiled)
            _check_data_set(case, executor, i, inputs, outputs, baked)
    except AssertionError as e:
        return Outcome(FAILED, f"wrong values: {_first_line(e)}", tuple(baked))
    except Exception as e:
        return Outcome(FAILED, f"run: {type(e).__name__}: {_first_line(e)}", tuple(baked))
    return Outcome(PASSED, f"baked inputs {baked}" if baked else "", tuple(baked))


def run_unbaked(case: Case, baked: Outcome | None = None) -> Outcome:
    """`case`'s unbaked outcome; a baked-mode outcome that baked nothing is that outcome already."""
    if baked is not None and not baked.baked:
        return baked
    return run_case(case, bake=False)


def needs_constant(outcome: Outcome) -> str | None:
    """For a compile failure because a run-time input had to be a constant: which op and input
    ("Reshape input 1 (shape)"); None for any other outcome."""
    if not outcome.detail.startswith("compile: ") or not _NEEDS_CONSTANT.search(outcome.detail):
        return None
    found = _NAMED_INPUT.search(outcome.detail)
    return f"{found[1]} input {found[2]}" if found else outcome.detail.removeprefix("compile: ")


# ----- selection ---------------------------------------------------------------------------------


def _all_registered(model: onnx.ModelProto, reg: OperatorRegistry) -> bool:
    opsets = {_canon(o.domain): o.version for o in model.opset_import}
    return all(
        opsets.get(_canon(domain), 1) >= _LOWERED_AT_LOAD.get((_canon(domain), op_type), 10**6)
        or reg.get(domain, op_type, opsets.get(_canon(domain))) is not None
        for domain, op_type in _model_ops(model)
    )


# ops the loader rewrites into registered ones before any operator sees them (from the opset given): the
# case runs end to end. Scan from opset 9 is read as a Loop (onyxia.onnx.scan_as_loop); opset 8's batched
# Scan is not lowered and stays unsupported.
_LOWERED_AT_LOAD = {("", "Scan"): 9}


def _model_ops(model: onnx.ModelProto) -> Iterator[tuple[str, str]]:
    yield from _graph_ops(model.graph.node)
    for function in model.functions:
        yield from _graph_ops(function.node)


def _graph_ops(nodes: Sequence[onnx.NodeProto]) -> Iterator[tuple[str, str]]:
    """Ops of `nodes` and of every subgraph (If/Loop/Scan bodies) they hold, Constant included."""
    for node in nodes:
        yield node.domain, node.op_type
        for attr in node.attribute:
            for graph in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                yield from _graph_ops(graph.node)


def _canon(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def _no_gpu_type(model: onnx.ModelProto, storable: frozenset[DataType] = frozenset()) -> str | None:
    """Describe the first graph input/output without a WebGPU storage type (nor one of `storable`), or None."""
    for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
        for value in values:
            which = value.type.WhichOneof("value")
            if which != "tensor_type":
                return f"{kind} '{value.name}' is a {which}"
            code = value.type.tensor_type.elem_type
            try:
                if DataType(code).has_gpu_type or DataType(code) in storable:
                    continue
            except ValueError:  # a dtype newer than onyxia's DataType enum
                pass
            return f"{kind} '{value.name}' is {onnx.TensorProto.DataType.Name(code)}"
    return None


# ----- running -----------------------------------------------------------------------------------


def _compile_baking(case: Case, baked: list[str]) -> Any:
    """Compile; while an input must be known at compile time, bake one more graph input (last first)."""
    names = [v.name for v in case.model.graph.input]
    while True:
        try:
            return _compile(_bake(case.model, case.data_sets[0][0], baked))
        except (ShapeInferenceError, UnsupportedOpError) as e:
            remaining = [n for n in reversed(names) if n not in baked]
            if not _NEEDS_CONSTANT.search(str(e)) or not remaining:
                raise
            baked.append(remaining[0])


def _bake(model: onnx.ModelProto, inputs: Sequence[Any], names: Sequence[str]) -> onnx.ModelProto:
    """A copy of `model` whose graph inputs `names` are initializers holding their `inputs` values."""
    if not names:
        return model
    values = {v.name: _array(a) for v, a in zip(model.graph.input, inputs)}
    baked = onnx.ModelProto()
    baked.CopyFrom(model)
    kept = [v for v in baked.graph.input if v.name not in names]
    del baked.graph.input[:]
    baked.graph.input.extend(kept)
    baked.graph.initializer.extend(numpy_helper.from_array(values[n], n) for n in names)
    return baked


def _compile(model: onnx.ModelProto) -> Any:
    from onyxia.compiler import CompilerPipeline
    from onyxia.onnx import load_and_parse_model

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "model.onnx")
        onnx.save_model(model, path)
        graph = load_and_parse_model(path)
    return CompilerPipeline(registry()).compile(graph, {})


def _compile_failure(case: Case, e: Exception, listed: bool, baked: tuple[str, ...]) -> Outcome:
    message = f"compile: {type(e).__name__}: {_first_line(e)}"
    if case.no_gpu_type and isinstance(e, OnyxiaError):
        return Outcome(REJECTED_DTYPE, f"{case.no_gpu_type}: {message}", baked)
    if listed and _is_rejection(e):
        return Outcome(REJECTED, message, baked)
    return Outcome(FAILED, message, baked)


def _is_rejection(e: Exception) -> bool:
    """A deliberate compile-time refusal, as opposed to a crash or a wrong shape."""
    return isinstance(e, UnsupportedOpError) or (isinstance(e, PlanningError) and "no WebGPU storage type" in str(e))


def _check_data_set(
    case: Case, executor: Any, index: int, inputs: Sequence[Any], outputs: Sequence[Any], baked: Sequence[str]
) -> None:
    feeds = {v.name: _array(a) for v, a in zip(case.model.graph.input, inputs) if v.name not in baked}
    results = executor.run(feeds)
    for value, want in zip(case.model.graph.output, outputs):
        want = _array(want)
        assert value.name in results, f"data set {index}: output '{value.name}' missing from the results"
        assert_close(results[value.name], want, f"data set {index} '{value.name}'", tolerance=_tolerance(case, want))


def _tolerance(case: Case, expected: np.ndarray) -> tuple[float, float] | None:
    """The case's (rtol, atol), widened to the oracle's GPU tolerance for the dtype the GPU computes it in
    (float64 is demoted to f32: `DataType.is_demoted`, so float32's); None = exact."""
    computed = _computed_dtype(expected.dtype)
    if computed not in TOLERANCE:
        return None
    rtol, atol = TOLERANCE[computed]
    return max(case.rtol, rtol), max(case.atol, atol)


def _computed_dtype(dtype: np.dtype) -> np.dtype:
    try:
        onyxia_dtype = DataType.from_numpy(dtype)
    except OnyxiaError:  # no ONNX counterpart (strings): compared exactly
        return dtype
    return onyxia_dtype.gpu_numpy if onyxia_dtype.is_demoted else dtype


def _array(value: Any) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "(no message)"
