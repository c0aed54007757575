"""`Runtime`: choosing a WebGPU adapter and opening one device for every model loaded on it.

The `backend` setting (``ONYXIA_BACKEND``: vulkan, metal, dx12, gl) restricts the choice to one
backend, which is how a machine with both a Vulkan and a GL view of the same GPU is pinned. The device asks only for
features Onyxia uses (``immediates``, ``shader-f16``, ``subgroup``) and for the adapter's full buffer limits, since
WebGPU's defaults (128 MiB buffers) would cap model size far below what the hardware allows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import wgpu

from onyxia.core.errors import DeviceError
from onyxia.core.plan import CompiledModel
from onyxia.core.settings import settings
from onyxia.runtime import ffi_warmup
from onyxia.runtime.device import WGPU_ERRORS, DeviceContext, wgpu_boundary
from onyxia.runtime.executor import PlanExecutor
from onyxia.runtime.profiling import TIMESTAMP_FEATURE

__all__ = ["BACKENDS", "Runtime", "describe_adapter", "select_adapter"]

log = logging.getLogger(__name__)

BACKENDS = {"vulkan": "Vulkan", "metal": "Metal", "dx12": "D3D12", "gl": "OpenGL"}  # env value -> backend_type
_USEFUL_FEATURES = ("shader-f16", "subgroup")  # subgroup: the `subgroup` kernel variants (operators/matmul/variants)
_PASSED_LIMITS = ("max-storage-buffer-binding-size", "max-buffer-size", "max-storage-buffers-per-shader-stage")
_TYPE_PREFERENCE = ("DiscreteGPU", "IntegratedGPU", "VirtualGPU", "CPU")


def describe_adapter(adapter: wgpu.GPUAdapter) -> str:
    info = adapter.info
    return f"{info.get('device') or info.get('description') or '?'} ({info.get('backend_type')}, {info.get('adapter_type')})"


def _can_compute(adapter: wgpu.GPUAdapter) -> bool:
    """GL adapters without compute shaders report zero compute limits instead of refusing outright."""
    limits: dict[str, int] = adapter.limits
    return (
        limits.get("max-compute-workgroups-per-dimension", 0) > 0
        and limits.get("max-storage-buffers-per-shader-stage", 0) > 0
    )


def _rank(adapter: wgpu.GPUAdapter) -> int:
    kind = adapter.info.get("adapter_type")
    return _TYPE_PREFERENCE.index(kind) if kind in _TYPE_PREFERENCE else len(_TYPE_PREFERENCE)


def _adapters() -> list[wgpu.GPUAdapter]:
    with wgpu_boundary(DeviceError, "enumerating WebGPU adapters"):
        return list(wgpu.gpu.enumerate_adapters_sync())


def _seen(adapters: list[wgpu.GPUAdapter]) -> str:
    return "; ".join(describe_adapter(a) for a in adapters) or "none"


def select_adapter(backend: str | None) -> wgpu.GPUAdapter:
    """The adapter to use: the high-performance default, or the best compute-capable one of `backend`.

    Without a backend, every adapter is enumerated only to name them in the error: enumeration opens
    each backend's driver (GL's too), 0.3 s of a new process's start-up on lavapipe."""
    if backend is None:
        try:
            chosen = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except WGPU_ERRORS:
            chosen = None
        if chosen is None or not _can_compute(chosen):
            raise DeviceError(f"no WebGPU adapter that can run compute shaders; adapters seen: {_seen(_adapters())}")
        return chosen
    key = backend.strip().lower()
    if key not in BACKENDS:
        raise DeviceError(f"ONYXIA_BACKEND={backend!r} is not a backend; expected one of {sorted(BACKENDS)}")
    adapters = _adapters()
    seen = _seen(adapters)
    matching = [a for a in adapters if a.info.get("backend_type") == BACKENDS[key] and _can_compute(a)]
    if not matching:
        raise DeviceError(
            f"ONYXIA_BACKEND={backend!r}: no compute-capable {BACKENDS[key]} adapter; adapters seen: {seen}"
        )
    return min(matching, key=_rank)


class Runtime:
    """One adapter and device; `load_model` turns compiled plans into executors on it.

    `use_immediates=None` uses immediates where the adapter has them; False forces the uniform
    fallback (so both paths can be tested on one machine); True makes their absence an error.
    `profiling=True` also asks for 'timestamp-query' where the adapter has it (`PlanExecutor.profile_run`).
    """

    def __init__(
        self, *, backend: str | None = None, use_immediates: bool | None = None, profiling: bool = False
    ) -> None:
        backend = backend if backend is not None else settings().backend
        ffi_warmup.warm()  # wgpu-py's C type strings for this whole path, parsed in one pass
        self.adapter = select_adapter(backend)
        self.adapter_info: dict[str, object] = dict(self.adapter.info)
        has_immediates = "immediates" in self.adapter.features
        if use_immediates and not has_immediates:
            raise DeviceError(f"use_immediates=True, but adapter {describe_adapter(self.adapter)} lacks 'immediates'")
        immediates = has_immediates if use_immediates is None else use_immediates
        self.ctx = _open_device(self.adapter, immediates, (TIMESTAMP_FEATURE,) if profiling else ())
        self.features: frozenset[str] = self.ctx.features
        log.info("runtime on %s, features %s", describe_adapter(self.adapter), sorted(self.features))

    @property
    def limits(self) -> dict[str, int]:
        return dict(self.ctx.limits)

    @property
    def use_immediates(self) -> bool:
        return self.ctx.use_immediates

    def load_model(
        self,
        compiled: CompiledModel,
        dims: Mapping[str, int] | None = None,
        *,
        max_dims: Mapping[str, int] | None = None,
    ) -> PlanExecutor:
        """An executor for `compiled`; `dims` binds symbols now, `max_dims` sizes buffers for the largest
        dims up front (an LLM's context length) so growing never reallocates."""
        return PlanExecutor(self.ctx, compiled, dims, max_dims)


def _open_device(adapter: wgpu.GPUAdapter, immediates: bool, extra: tuple[str, ...] = ()) -> DeviceContext:
    features = [f for f in (*_USEFUL_FEATURES, *extra) if f in adapter.features]
    limits = {name: adapter.limits[name] for name in _PASSED_LIMITS if name in adapter.limits}
    if immediates:
        features.append("immediates")
        limits["max-immediate-size"] = adapter.limits.get("max-immediate-size", 0)
    with wgpu_boundary(DeviceError, f"opening a device on {describe_adapter(adapter)}"):
        device = adapter.request_device_sync(label="onyxia", required_features=features, required_limits=limits)
    return DeviceContext(device, frozenset(device.features), dict(device.limits), immediates)
