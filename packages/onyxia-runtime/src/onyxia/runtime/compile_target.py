"""What a compile needs to know about the device its plan will run on, read from an opened `Runtime`.

Kernel families choose their variants from `AdapterFacts` (subgroups, f16, workgroup sizes, whether the adapter
is a CPU rasteriser), and planning splits weights by the storage-binding and buffer limits. A plan compiled
without them targets a default CPU rasteriser with WebGPU's default limits, which is right for lavapipe's
plain kernels and wrong for a GPU: every path that compiles for a device it has opened (`onyxia run`, LLM
sessions, the benches) compiles inside `compiling_for(runtime)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from onyxia.core import BINDING_ALIGNMENT
from onyxia.core.adapter_facts import AdapterFacts, target_adapter
from onyxia.core.settings import override, settings

if TYPE_CHECKING:
    from onyxia.runtime.adapter import Runtime

__all__ = ["adapter_facts_of", "compiling_for", "device_limits"]


def adapter_facts_of(runtime: Runtime) -> AdapterFacts:
    """The facts kernel variants are chosen by (`onyxia.operators.matmul.variants`), from the opened device."""
    info, limits = runtime.adapter_info, runtime.limits
    # wgpu-py 0.32 spells the subgroup size keys "stackgroup_*"
    low = info.get("subgroup_min_size", info.get("stackgroup_min_size", 0))
    high = info.get("subgroup_max_size", info.get("stackgroup_max_size", 0))
    return AdapterFacts(
        cpu=info.get("adapter_type") == "CPU",
        subgroups="subgroup" in runtime.features,
        subgroup_min_size=low if isinstance(low, int) else 0,
        subgroup_max_size=high if isinstance(high, int) else 0,
        shader_f16="shader-f16" in runtime.features,
        workgroup_storage_bytes=limits.get("max-compute-workgroup-storage-size", 16384),
        invocations_per_workgroup=limits.get("max-compute-invocations-per-workgroup", 256),
        name=str(info.get("device") or info.get("description") or "unknown"),
    )


def device_limits(runtime: Runtime) -> dict[str, int]:
    """The compile's storage-binding and buffer limits: the device's (floored to the binding alignment), so
    weights are split where this device needs it and no more, unless ONYXIA_MAX_BINDING_BYTES /
    ONYXIA_MAX_BUFFER_BYTES (or `override`) set them."""
    current = settings()
    return {
        "max_binding_bytes": current.max_binding_bytes
        or runtime.ctx.max_binding_size // BINDING_ALIGNMENT * BINDING_ALIGNMENT,
        "max_buffer_bytes": current.max_buffer_bytes
        or runtime.ctx.max_buffer_size // BINDING_ALIGNMENT * BINDING_ALIGNMENT,
    }


@contextmanager
def compiling_for(runtime: Runtime) -> Iterator[AdapterFacts]:
    """Compile inside this block for `runtime`'s device: its limits and its kernel variants."""
    with override(**device_limits(runtime)), target_adapter(adapter_facts_of(runtime)) as facts:
        yield facts
