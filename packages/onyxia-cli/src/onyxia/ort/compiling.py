"""Every parse and compile `onyxia.ort` does, in one function: `compile_plan`.

A session compiles once, in its constructor, with the model's symbolic dims left open (only the
free-dimension overrides fixed): the executor binds them from each run's feed shapes and patches the
plan without recompiling. Where a kernel needs a dim as a number (a Conv's spatial size for some of
its variants...) the open compile fails; the session then gets a plan with no steps whose open input
dims are compiled dims not yet specialized (the mechanism `onyxia.compiler.deferred` uses for input
values): the first run's shapes move them, the executor asks the replanner for the plan at those
values, and keeps each such variant for reuse (`runtime/variants.py`). Re-planning happens inside
`compiling_for(runtime)` again, so a variant compiled during a run targets the same device.

`compile_plan` is the seam a compiled-plan cache wraps: it takes the model (a path or its bytes), the
dims by name (and by denotation) and the runtime; what it returns, the plan and a `ModelSignature`,
is plain data apart from the plan's replanner, which holds the parsed graph.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from onyxia.compiler import CompilerPipeline
from onyxia.compiler.replanning import GraphReplanner
from onyxia.core import CompiledModel, DataType, IrGraph, OperatorRegistry, PlanTensor, TensorRole, require_gpu_type
from onyxia.core.errors import OnyxiaError, PlanningError, ShapeInferenceError, SymbolicError
from onyxia.core.plan import Replanner
from onyxia.core.plan_values import UNSPECIALIZED
from onyxia.core.settings import settings
from onyxia.core.shapes import Absent
from onyxia.core.symbolic import SymbolicDim, SymbolicExpr
from onyxia.onnx import OnnxError
from onyxia.onnx.loader import model_label, parse_model_proto, read_model_proto
from onyxia.ort.initializers import with_initializers
from onyxia.ort.signature import ModelSignature, free_dimension_dims, read_signature
from onyxia.runtime import Runtime, compiling_for

__all__ = ["CompiledSession", "UnreadableModel", "compile_plan"]


class UnreadableModel(OnnxError):
    """The file or bytes are not an ONNX protobuf (onnxruntime's INVALID_PROTOBUF), as opposed to a
    model that reads but fails validation or compilation."""


@dataclass(frozen=True)
class CompiledSession:
    plan: CompiledModel  # with a replanner that compiles variants for `runtime`'s device
    signature: ModelSignature  # NodeArgs and metadata as onnxruntime reports them
    dims: dict[str, int]  # the compile dims: the overrides, resolved to the loader's symbols


@functools.cache
def _registry() -> OperatorRegistry:
    """The core operators and installed plugins, discovered once per process."""
    from onyxia.operators import core_operator_registry

    return core_operator_registry()


def compile_plan(
    source: Path | bytes,
    dims: Mapping[str, int],
    runtime: Runtime,
    denotations: Mapping[str, int] | None = None,
    initializers: Mapping[str, np.ndarray] | None = None,
    external_files: Mapping[str, bytes] | None = None,
) -> CompiledSession:
    """`_compile_plan` through the compiled-plan cache (`onyxia.cli.plan_cache`): a second process opening
    the same model skips parse and compile. Sessions given replacement weights compile every time."""
    from onyxia.cli.plan_cache import cache_enabled, cached_build, plan_key, plans_dir

    if initializers or external_files or not cache_enabled():
        return _compile_plan(source, dims, runtime, denotations, initializers, external_files)
    with compiling_for(runtime):
        config = settings()
        named = {"denotations": sorted((denotations or {}).items())}
        key = plan_key(source, dims, config, passes=["ort-session"], extra=named, memo=plans_dir(config) / "digests")

        def build() -> tuple[CompiledModel, tuple[ModelSignature, dict[str, int]]]:
            compiled = _compile_plan(source, dims, runtime, denotations)
            return compiled.plan, (compiled.signature, compiled.dims)

        plan, (signature, fixed), _ = cached_build(
            key,
            build,
            data_dir=None if isinstance(source, bytes) else source.parent,
            rebuild=lambda: _compile_plan(source, dims, runtime, denotations).plan,
        )
    return CompiledSession(plan, signature, fixed)


def _compile_plan(
    source: Path | bytes,
    dims: Mapping[str, int],
    runtime: Runtime,
    denotations: Mapping[str, int] | None = None,
    initializers: Mapping[str, np.ndarray] | None = None,
    external_files: Mapping[str, bytes] | None = None,
) -> CompiledSession:
    """Parse `source` and compile it for `runtime` with `dims` (dim_param name -> value) and
    `denotations` (dim denotation -> value) fixed, every other dim left symbolic; `initializers` and
    `external_files` are the session options' replacement weights (`initializers.with_initializers`),
    which a cache must key on too."""
    try:
        proto = read_model_proto(source)
    except OnnxError as e:
        raise UnreadableModel(str(e)) from e
    proto = with_initializers(proto, initializers or {}, external_files or {})
    fixed = free_dimension_dims(proto, dims, denotations or {})
    signature = read_signature(proto, fixed)
    graph = parse_model_proto(proto, model_label(source))
    compiler = CompilerPipeline(_registry())
    with compiling_for(runtime):
        try:
            plan = compiler.compile(graph, fixed)
        except (PlanningError, ShapeInferenceError, SymbolicError) as e:
            plan = _per_shape_plan(graph, fixed, compiler, e)
    if plan.replanner is not None:
        plan.replanner = _OnDevice(plan.replanner, runtime)
    return CompiledSession(plan, signature, fixed)


class _OnDevice:
    """The compiler's replanner, run inside `compiling_for(runtime)`: a variant compiled when a run's
    shapes move a compiled dim picks the same device's kernels and limits as the first compile."""

    def __init__(self, inner: Replanner, runtime: Runtime) -> None:
        self._inner, self._runtime = inner, runtime

    @property
    def input_dims(self) -> Mapping[str, tuple[SymbolicDim, ...]]:
        return self._inner.input_dims

    def replan(self, dims: Mapping[str, int]) -> CompiledModel:
        with compiling_for(self._runtime):
            return self._inner.replan(dims)


def _per_shape_plan(
    graph: IrGraph, dims: dict[str, int], compiler: CompilerPipeline, error: OnyxiaError
) -> CompiledModel:
    """A plan with no steps whose open input dims wait for the first run's shapes (see the module
    docstring); `error` stands when no input dim is open, since then no shape could help."""
    open_dims = sorted(_open_input_dims(graph) - dims.keys())
    if not open_dims:
        raise error
    tensors: dict[int, PlanTensor] = {}
    for tid in graph.inputs:
        t = graph.tensor(tid)
        require_gpu_type(t.dtype, f"input '{t.name}'")
        shape = () if isinstance(t.shape, Absent) else tuple(t.shape.dims)
        tensors[tid] = PlanTensor(tid, t.name, t.dtype, shape, TensorRole.INPUT)
    for tid in graph.outputs:  # placeholders: the first run switches to the plan for its shapes
        t = graph.tensor(tid)
        tensors.setdefault(tid, PlanTensor(tid, t.name, DataType.FLOAT, (), TensorRole.OUTPUT))
    plan = CompiledModel([], [], tensors, list(graph.inputs), list(graph.outputs), [])
    plan.dims = {**dims, **dict.fromkeys(open_dims, UNSPECIALIZED)}
    plan.metadata = {"graph": graph.name, "per_shape": f"compiled per input shape: {error}"}
    plan.replanner = GraphReplanner(compiler.compile, graph, plan.dims, settings())
    return plan


def _open_input_dims(graph: IrGraph) -> set[str]:
    names: set[str] = set()
    for tid in graph.inputs:
        shape = graph.tensor(tid).shape
        if not isinstance(shape, Absent):
            names |= {str(d) for d in shape.dims if isinstance(d, SymbolicExpr) and d.is_name}
    return names
