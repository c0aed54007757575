"""Every parse and compile `onyxia.ort` does, in one function: `compile_plan`.

A session compiles once, in its constructor, with the model's symbolic dims left open (only the
free-dimension overrides fixed): the executor binds them from each run's feed shapes and patches the
plan without recompiling. Where the plan needs a dim as a number, found at compile time (the open compile
fails, or a shape rule records that the dim's value decides the plan's structure; never for speed: the conv
kernels run open image sizes as fast as static ones), the session gets a plan that waits for the first run's value of
just those dims and compiles one variant per value, reused and kept in the plan cache (`per_shape`). Re-planning happens inside `compiling_for(runtime)` again, so a
variant compiled during a run targets the same device. Found at run time instead: feeds that break an equality the
open compile assumed (a symbolic dim broadcast against another, where onnxruntime broadcasts a 1); every plan is
marked `REPLAN_ASSUMPTIONS`, so the executor compiles that constraint's dims per value rather than refusing the run.

`compile_plan` is the seam a compiled-plan cache wraps: it takes the model (a path or its bytes), the
dims by name (and by denotation) and the runtime; what it returns, the plan and a `ModelSignature`,
is plain data apart from the plan's replanner, which holds the parsed graph.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from onyxia.compiler import CompilerPipeline
from onyxia.compiler.replanning import GraphReplanner
from onyxia.core import CompiledModel, IrGraph, OperatorRegistry
from onyxia.core.errors import PlanningError, ShapeInferenceError, SymbolicError
from onyxia.core.plan import Replanner
from onyxia.core.plan_values import ValueSymbol
from onyxia.core.settings import settings
from onyxia.core.symbolic import SymbolicDim
from onyxia.onnx import OnnxError
from onyxia.onnx.loader import model_label, parse_model_proto, read_model_proto
from onyxia.ort.initializers import with_initializers
from onyxia.ort.per_shape import PER_SHAPE, VariantReplanner, open_dims, per_shape_plan, required_static
from onyxia.ort.signature import ModelSignature, free_dimension_dims, read_signature
from onyxia.runtime import Runtime, compiling_for
from onyxia.runtime.variants import REPLAN_ASSUMPTIONS

if TYPE_CHECKING:
    from onyxia.cli.plan_cache import PlanKey

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

        plan, (signature, fixed), hit = cached_build(
            key,
            build,
            data_dir=None if isinstance(source, bytes) else source.parent,
            rebuild=lambda: _compile_plan(source, dims, runtime, denotations).plan,
        )
    if hit and PER_SHAPE in plan.metadata and plan.replanner is not None:  # a variant needs no open compile
        compiled = dict(plan.dims)

        def parsed() -> GraphReplanner:
            graph = _parse(source, dims, denotations)[1]
            return GraphReplanner(CompilerPipeline(_registry()).compile, graph, compiled, settings())

        plan.replanner = _variants(plan.replanner.input_dims, source, runtime, parsed, denotations, True)
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
    signature, graph, fixed = _parse(source, dims, denotations, initializers, external_files)
    compiler = CompilerPipeline(_registry())
    with compiling_for(runtime):
        try:
            plan = compiler.compile(graph, fixed)
        except (PlanningError, ShapeInferenceError, SymbolicError) as e:
            waiting = open_dims(graph, fixed)
            if not waiting:  # no shape could help
                raise
            plan = per_shape_plan(graph, fixed, dict.fromkeys(waiting, f"the open compile failed: {e}"))
        else:
            required = required_static(plan, graph, fixed)
            waiting = open_dims(graph, fixed)
            if plan.value_symbols and not plan.operations and waiting:  # waits for input values (per_shape)
                values = plan.value_symbols
                why = "the plan waits for input values; open dims were never tried at them"
                plan = per_shape_plan(graph, fixed, {**dict.fromkeys(waiting, why), **_values(values)})
                plan.value_symbols = values
            elif required:
                plan = per_shape_plan(graph, fixed, required)
    plan.metadata[REPLAN_ASSUMPTIONS] = "yes"  # feeds onnxruntime broadcasts re-plan, not fail (variants.py)
    if PER_SHAPE in plan.metadata:
        inner = GraphReplanner(compiler.compile, graph, plan.dims, settings())
        cacheable = not initializers and not external_files  # replacement weights: keyed by nothing we have
        plan.replanner = _variants(inner.input_dims, source, runtime, lambda: inner, denotations, cacheable)
    elif plan.replanner is not None:
        plan.replanner = _OnDevice(plan.replanner, runtime)
    return CompiledSession(plan, signature, fixed)


def _values(symbols: list[ValueSymbol]) -> dict[str, str]:
    return {s.symbol: "a value of an input that sets a kernel's structure" for s in symbols}


def _parse(
    source: Path | bytes,
    dims: Mapping[str, int],
    denotations: Mapping[str, int] | None,
    initializers: Mapping[str, np.ndarray] | None = None,
    external_files: Mapping[str, bytes] | None = None,
) -> tuple[ModelSignature, IrGraph, dict[str, int]]:
    try:
        proto = read_model_proto(source)
    except OnnxError as e:
        raise UnreadableModel(str(e)) from e
    proto = with_initializers(proto, initializers or {}, external_files or {})
    fixed = free_dimension_dims(proto, dims, denotations or {})
    return read_signature(proto, fixed), parse_model_proto(proto, model_label(source)), fixed


def _variants(
    input_dims: Mapping[str, tuple[SymbolicDim, ...]],
    source: Path | bytes,
    runtime: Runtime,
    inner: Callable[[], Replanner],
    denotations: Mapping[str, int] | None,
    cache: bool,
) -> VariantReplanner:
    """The per-shape plan's replanner: each variant through the plan cache (when `cache`), `inner` on a miss."""

    def variant_key(dims: Mapping[str, int]) -> PlanKey:
        from onyxia.cli.plan_cache import plan_key, plans_dir

        named = {"denotations": sorted((denotations or {}).items())}
        memo = plans_dir(settings()) / "digests"
        return plan_key(source, dims, settings(), passes=["ort-session-variant"], extra=named, memo=memo)

    data_dir = None if isinstance(source, bytes) else source.parent
    return VariantReplanner(input_dims, inner, runtime, variant_key if cache else None, data_dir)


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
