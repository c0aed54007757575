"""`LazyReplanner`: the replanner of a plan loaded from the cache, which parses and compiles only when asked.

A cached plan has no graph, and loading one must not parse it: that is the point of the cache. Yet the
runtime re-plans when a compiled dim moves (`runtime/variants.py`), so each cached plan (and each subplan)
gets this stand-in. It knows `input_dims` (stored with the plan, read on every `select`) and, on the first
`replan`, compiles the model again exactly as the cached plan was compiled, under the same settings and
adapter facts, then hands the call to the fresh plan's own replanner (subplans: the one at the same place
in `walk_plans`' order). One compile serves every stand-in of the entry.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping

from onyxia.core.adapter_facts import AdapterFacts, target_adapter
from onyxia.core.errors import PlanningError
from onyxia.core.plan import CompiledModel, Replanner
from onyxia.core.plan_io import walk_plans
from onyxia.core.settings import Settings, override
from onyxia.core.symbolic import SymbolicDim

__all__ = ["LazyReplanner", "Rebuild"]


class Rebuild:
    """The cached plan's compile, run at most once, under the settings and facts it was first compiled with."""

    def __init__(self, compile_plan: Callable[[], CompiledModel], config: Settings, facts: AdapterFacts) -> None:
        self._compile, self._config, self._facts = compile_plan, config, facts
        self._plans: list[CompiledModel] | None = None
        self._lock = threading.Lock()

    def plans(self) -> list[CompiledModel]:
        with self._lock:
            if self._plans is None:
                from onyxia.cli.plan_cache.store import STATS

                fields = {f.name: getattr(self._config, f.name) for f in dataclasses.fields(self._config)}
                with override(**fields), target_adapter(self._facts):
                    self._plans = walk_plans(self._compile())
                STATS.replans += 1
            return self._plans


class LazyReplanner:
    """Stands in for plan `index` (of `walk_plans`) of a cached entry; compiles on the first `replan`."""

    def __init__(self, rebuild: Rebuild, index: int, input_dims: Mapping[str, tuple[SymbolicDim, ...]]) -> None:
        self._rebuild, self._index = rebuild, index
        self.input_dims: dict[str, tuple[SymbolicDim, ...]] = dict(input_dims)

    def replan(self, dims: Mapping[str, int]) -> CompiledModel:
        plans = self._rebuild.plans()
        inner: Replanner | None = plans[self._index].replanner if self._index < len(plans) else None
        if inner is None:
            raise PlanningError(
                f"re-plan at {dict(dims)}: the model compiled again has no replanner for plan {self._index} "
                "(the cached plan does not match a fresh compile; clear the cache with `onyxia cache clear`)"
            )
        return inner.replan(dims)
