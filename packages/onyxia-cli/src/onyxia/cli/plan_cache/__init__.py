"""The compiled-plan cache: a second process loading the same model skips parse and compile.

`compile_cached` is what every user-facing compile calls; `key` says what a plan depends on, `store` where
plans live and how they are written safely, `lazy` how a cached plan still re-plans, and
`onyxia.core.plan_io` the file format. ``onyxia cache info|clear`` shows and empties the directory.
"""

from onyxia.cli.plan_cache.compile import cache_enabled, cached_build, compile_cached
from onyxia.cli.plan_cache.key import PlanKey, plan_key
from onyxia.cli.plan_cache.store import STATS, CacheStats, PlanStore, plans_dir

__all__ = [
    "STATS",
    "CacheStats",
    "PlanKey",
    "PlanStore",
    "cache_enabled",
    "cached_build",
    "compile_cached",
    "plan_key",
    "plans_dir",
]
