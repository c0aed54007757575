"""What every runtime module shares about the opened device, and the wgpu error boundary.

`DeviceContext` is created once by `Runtime` and handed to each executor, so executors never ask
wgpu for limits on a hot path. `wgpu_boundary` is the one place where wgpu's exceptions become
onyxia errors: callers say where they were (shader, node, tensor) and which onyxia error fits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import wgpu

from onyxia.core.errors import DeviceError, OnyxiaError

__all__ = ["WGPU_ERRORS", "DeviceContext", "ExecutorStats", "check_features", "wgpu_boundary", "serialized"]

_FALLBACK_FEATURES = frozenset({"immediates"})  # the uniform rewrite stands in for these

# wgpu-py raises GPUError subclasses for validation/OOM and plain RuntimeError/ValueError for
# failures inside wgpu-native's C calls (e.g. a lost device or a bad map request).
WGPU_ERRORS: tuple[type[Exception], ...] = (wgpu.GPUError, RuntimeError, ValueError)


@dataclass(frozen=True)
class DeviceContext:
    """The opened device plus the limits the runtime checks against (read once at device creation)."""

    device: wgpu.GPUDevice
    features: frozenset[str]
    limits: dict[str, int]
    use_immediates: bool

    @property
    def queue(self) -> wgpu.GPUQueue:
        return self.device.queue

    @property
    def max_binding_size(self) -> int:
        """Largest storage binding, floored to 4 bytes (binding sizes must be multiples of 4)."""
        return self.limits["max-storage-buffer-binding-size"] // 4 * 4

    @property
    def max_buffer_size(self) -> int:
        return self.limits["max-buffer-size"] // 4 * 4

    @property
    def max_workgroups(self) -> int:
        return self.limits["max-compute-workgroups-per-dimension"]

    @property
    def offset_alignment(self) -> int:
        return self.limits["min-storage-buffer-offset-alignment"]


@dataclass
class ExecutorStats:
    """Counters tests assert on: a dims change must move only `bind_groups_created`,
    `buffers_created` and `dimension_updates`, never the shader or pipeline counts. A change of a
    compiled dim switches plans (`plan_switches`; `replans` of them compiled a new variant): then
    only the pipelines of WGSL no earlier variant had are created."""

    shader_modules_created: int = 0
    pipelines_created: int = 0
    bind_group_layouts_created: int = 0
    bind_groups_created: int = 0
    buffers_created: int = 0
    dimension_updates: int = 0
    dimension_update_ns: int = (
        0  # host time in update_dimensions(), over all calls (a decode step's share of host work)
    )
    runs: int = 0
    dispatches_encoded: int = field(default=0)  # by the latest run (skipped 0-size dispatches excluded)
    # storage bytes the latest run copies buffer to buffer (plan copies and carried state; not the read-back):
    # what an LLM decode step spends moving a cache that is not appended in place
    bytes_copied: int = 0
    bytes_read_back: int = 0  # outputs copied into the staging buffer, over all runs
    error_word_bytes: int = 0  # the run-time error word copied behind them (runtime/run_errors.py), over all runs
    staging_maps: int = 0  # maps of the staging buffer: at most one per run
    layout_fallbacks: int = 0  # dims changes the incremental layout got wrong (declined, yet valid)
    value_readbacks: int = 0  # mid-run reads of dims computed on the GPU (NonZero's count): one submit each
    subplan_runs: int = 0  # If branches and Loop iterations run as subplans (runtime/control_flow.py)
    loop_iterations: int = 0  # of which Loop iterations
    value_bytes_read_back: int = 0  # their bytes, over all runs (runtime/segments.py)
    plan_switches: int = 0  # moves to another plan variant because a compiled (static) dim changed
    replans: int = 0  # variants the plan's replanner compiled (the rest of the switches found theirs cached)
    buffers_adopted: int = 0  # GPU buffers a switch kept (weights with the same data, storage of the same tensor)


@contextmanager
def wgpu_boundary(error: type[OnyxiaError], where: str) -> Iterator[None]:
    """Re-raise a wgpu failure as `error` prefixed with `where` (shader label, node, tensor)."""
    try:
        yield
    except WGPU_ERRORS as e:
        detail = " ".join(str(e).split())
        raise error(f"{where}: {type(e).__name__}: {detail}") from e


def check_features(required: Collection[str], ctx: DeviceContext) -> None:
    """A plan needing adapter features the device lacks is refused at load, naming them."""
    missing = sorted(set(required) - ctx.features - _FALLBACK_FEATURES)
    if missing:
        raise DeviceError(
            f"the model requires adapter features {missing}, which the device lacks "
            f"(device features: {sorted(ctx.features)})"
        )


class _Locked(Protocol):
    _lock: threading.RLock


_S = TypeVar("_S", bound=_Locked)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def serialized(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Run `method` holding the object's `_lock`: wgpu-py's queue and a mapped staging buffer are not
    safe to share between threads mid-call (two runs at once abort the process)."""

    def locked(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            return method(self, *args, **kwargs)

    locked.__name__, locked.__qualname__, locked.__doc__ = method.__name__, method.__qualname__, method.__doc__
    return locked
