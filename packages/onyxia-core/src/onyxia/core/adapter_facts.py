"""`AdapterFacts`: what a compile may assume of the device that will run its plan.

Operators never import the runtime, yet their kernels should fit the adapter: lavapipe runs a workgroup 8
invocations at a time on one CPU thread, a discrete GPU 32 or 64 per warp with thousands in flight. The
runtime's side (`onyxia.runtime.adapter_facts_of`, `compiling_for`) turns the adapter's features and limits into this
plain record, and the compile runs inside `target_adapter(facts)`; kernel families read `adapter_facts()`
while planning and pick a variant from their own table (`onyxia.operators.matmul.variants`).

A compile without a device (tests, `onyxia compile`) assumes a CPU rasteriser (`AdapterFacts()`): lavapipe,
the adapter every figure of this project is measured on. `force_variants({"matmul": "portable"})` makes a
family use a named variant whatever the facts say, so a test can run every variant on lavapipe.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["AdapterFacts", "adapter_facts", "force_variants", "forced_variant", "target_adapter"]


@dataclass(frozen=True)
class AdapterFacts:
    """The adapter's facts that kernel variants depend on (WebGPU's defaults where unknown)."""

    cpu: bool = True  # a software rasteriser (adapter_type CPU): lavapipe, llvmpipe, SwiftShader
    subgroups: bool = False  # the device was opened with the 'subgroup' feature
    subgroup_min_size: int = 0  # 0: unknown
    subgroup_max_size: int = 0
    shader_f16: bool = False
    workgroup_storage_bytes: int = 16384  # maxComputeWorkgroupStorageSize
    invocations_per_workgroup: int = 256  # maxComputeInvocationsPerWorkgroup
    name: str = field(default="unknown", compare=False)  # for messages only

    def describe(self) -> str:
        lanes = f"subgroups {self.subgroup_min_size}-{self.subgroup_max_size}" if self.subgroups else "no subgroups"
        return f"{self.name} ({'cpu' if self.cpu else 'gpu'}, {lanes}, f16 {'yes' if self.shader_f16 else 'no'})"


_facts: ContextVar[AdapterFacts | None] = ContextVar("onyxia_adapter_facts", default=None)
_forced: ContextVar[Mapping[str, str] | None] = ContextVar("onyxia_forced_variants", default=None)


def adapter_facts() -> AdapterFacts:
    """The facts of the adapter the current compile targets (a CPU rasteriser when none was given)."""
    return _facts.get() or AdapterFacts()


@contextmanager
def target_adapter(facts: AdapterFacts) -> Iterator[AdapterFacts]:
    """Compile for `facts` inside the block (this thread or task only)."""
    token = _facts.set(facts)
    try:
        yield facts
    finally:
        _facts.reset(token)


@contextmanager
def force_variants(variants: Mapping[str, str]) -> Iterator[None]:
    """Inside the block, family -> variant name wins over the facts (unknown names fail when planning)."""
    token = _forced.set({**(_forced.get() or {}), **variants})
    try:
        yield
    finally:
        _forced.reset(token)


def forced_variant(family: str) -> str | None:
    """The variant `force_variants` set for `family`, if any."""
    return (_forced.get() or {}).get(family)
