"""`compile_cached`: parse + compile a model for a runtime, or load the plan a previous process saved.

Every path that compiles a model for users goes through here (`onyxia run`, LLM sessions, `onyxia.ort`), so
a second process loading the same model at the same dims on the same device skips parse and compile. The
cache is skipped when the `plan_cache` setting is off, and when `check` or `dump_ir` asks for work a compile
does on the way (a cached plan would silently do neither). `cached_build` is the general form for callers
whose build does more than compile (an LLM session also reads the graph's signature): what `build` returns
besides the plan is stored with it and returned on a hit.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onyxia.cli.plan_cache.key import PlanKey, pass_description, plan_key
from onyxia.cli.plan_cache.lazy import LazyReplanner, Rebuild
from onyxia.cli.plan_cache.store import STATS, PlanStore, plans_dir
from onyxia.core.adapter_facts import adapter_facts
from onyxia.core.dtypes import DemotionWarning
from onyxia.core.plan import CompiledModel
from onyxia.core.settings import settings
from onyxia.core.symbolic import SymbolicDim

if TYPE_CHECKING:
    from onyxia.core import IrGraph, OperatorRegistry, Pass, PassSet
    from onyxia.runtime import Runtime

__all__ = ["cache_enabled", "cached_build", "compile_cached"]

log = logging.getLogger(__name__)


def cache_enabled() -> bool:
    config = settings()
    return config.plan_cache and not config.check and config.dump_ir is None


def cached_build(
    key: PlanKey,
    build: Callable[[], tuple[CompiledModel, Any]],
    *,
    data_dir: Path | None,
    rebuild: Callable[[], CompiledModel] | None = None,
) -> tuple[CompiledModel, Any, bool]:
    """(plan, extras, hit): the entry under `key`, else `build()`'s, stored. Call inside the compile's context
    (`compiling_for`). On a hit each plan's replanner is a `LazyReplanner` over `rebuild` (None: no replanner,
    for callers that drop it). Arrays mapped from files under `data_dir` are stored as references."""
    if not cache_enabled():
        plan, extras = build()
        return plan, extras, False
    config = settings()
    store = PlanStore(plans_dir(config), config.plan_cache_mb * 2**20)
    redo = Rebuild(rebuild, settings(), adapter_facts()) if rebuild is not None else None

    def stand_in(index: int, input_dims: Mapping[str, tuple[SymbolicDim, ...]]) -> LazyReplanner | None:
        return LazyReplanner(redo, index, input_dims) if redo is not None else None

    found = store.load(key.digest, stand_in)
    if found is not None:
        STATS.hits += 1
        plan, extras = found
        log.debug("plan cache hit %s (%s)", key.digest, key.parts.get("label"))
        if plan.demoted:  # what a compile would have said
            warnings.warn(plan.demotion_summary(), DemotionWarning, stacklevel=3)
        return plan, extras, True
    STATS.misses += 1
    plan, extras = build()
    store.save(key.digest, plan, extras, data_dir, {"key": key.parts})
    return plan, extras, False


def compile_cached(
    source: Path | bytes,
    dims: Mapping[str, int] | None = None,
    runtime: Runtime | None = None,
    *,
    passes: Sequence[Pass] = (),
    pass_sets: Sequence[PassSet] = (),
    registry: Callable[[], OperatorRegistry] | None = None,
    registry_key: str | None = None,
    graph: IrGraph | None = None,
) -> CompiledModel:
    """`source` (a path, or the model's bytes) parsed and compiled at `dims` inside `compiling_for(runtime)`
    (no runtime: for the compile's current target) with the registry's passes, then `pass_sets` and
    `passes`; or the cached plan of an earlier identical compile, whose replanner compiles only if asked.

    `registry` replaces the core registry (with its plugins); its plans are cached only under a
    `registry_key` naming what it holds. `graph`: `source` already parsed, used on a miss instead of parsing
    again (the caller needed it to bind dims)."""
    fixed = dict(dims or {})
    source = source if isinstance(source, bytes) else Path(source)
    with _target(runtime):
        extra_passes = [p for s in pass_sets for p in s.passes] + list(passes)

        def compile_plan() -> CompiledModel:
            from onyxia.onnx import load_and_parse_model  # imports onnx: only a miss pays for it

            return _compile(graph or load_and_parse_model(source), fixed, pass_sets, passes, registry)

        if not cache_enabled() or (registry is not None and registry_key is None):
            return compile_plan()
        described = [f"set:{s.name}" for s in pass_sets] + pass_description(extra_passes)
        memo = plans_dir(settings()) / "digests"
        key = plan_key(
            source, fixed, settings(), passes=described, extra={"registry": registry_key or "core"}, memo=memo
        )
        data_dir = None if isinstance(source, bytes) else source.parent
        plan, _, _ = cached_build(key, lambda: (compile_plan(), None), data_dir=data_dir, rebuild=compile_plan)
        return plan


def _compile(
    graph: IrGraph,
    dims: Mapping[str, int],
    pass_sets: Sequence[PassSet],
    passes: Sequence[Pass],
    registry: Callable[[], OperatorRegistry] | None,
) -> CompiledModel:
    from onyxia.compiler import CompilerPipeline
    from onyxia.operators import core_operator_registry

    pipeline = CompilerPipeline(registry() if registry is not None else core_operator_registry())
    for pass_set in pass_sets:
        pipeline.add_pass_set(pass_set)
    for p in passes:
        pipeline.add_pass(p)
    return pipeline.compile(graph, dims)


def _target(runtime: Runtime | None) -> contextlib.AbstractContextManager[object]:
    if runtime is None:
        return contextlib.nullcontext()
    from onyxia.runtime import compiling_for

    return compiling_for(runtime)
