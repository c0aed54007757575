"""The facts a session compiles for come from the opened device (lavapipe here): build_session's
`compiling_for(runtime)` is what lets the matmul family pick its variant."""

from __future__ import annotations

from onyxia.core.adapter_facts import target_adapter
from onyxia.operators.matmul.variants import chosen_variant
from onyxia.runtime import Runtime, adapter_facts_of


def test_lavapipe_facts_pick_the_shared_row_simd8_kernels() -> None:
    runtime = Runtime()
    facts = adapter_facts_of(runtime)
    assert facts.cpu == (runtime.adapter_info.get("adapter_type") == "CPU")
    assert facts.subgroups == ("subgroup" in runtime.features)
    assert facts.shader_f16 == ("shader-f16" in runtime.features)
    assert facts.invocations_per_workgroup == runtime.limits["max-compute-invocations-per-workgroup"]
    assert facts.cpu, f"these tests run on lavapipe, found {facts.describe()}"
    with target_adapter(facts):
        assert chosen_variant().name == "simd8_shared"  # lavapipe is opened with subgroups
