"""GPU-resident state: resident inputs, carries (present -> past copies), aliases, selective readback."""

import numpy as np
import pytest
from runtime_plans import ElementwiseSpec, build_plan, scale_plan

from onyxia.core import DataType, InputError, PlanCtx, ceil_div
from onyxia.runtime import Runtime


def test_carry_feeds_an_output_back_without_the_host(runtime: Runtime) -> None:
    executor = runtime.load_model(scale_plan([4], expr="x[i] + 1.0"))
    executor.write_input("x", np.zeros(4, np.float32))
    executor.carry({"x": "y"})
    results = [executor.run({})["y"] for _ in range(3)]
    np.testing.assert_array_equal(results[-1], np.full(4, 3.0, np.float32))
    with pytest.raises(InputError, match="'z' is not an output"):
        executor.carry({"x": "z"})


def test_resident_state_survives_growth(runtime: Runtime) -> None:
    executor = runtime.load_model(scale_plan(["n"], expr="x[i] + 1.0"))
    executor.update_dimensions({"n": 2})
    executor.write_input("x", np.array([5, 6], np.float32))
    executor.carry({"x": "y"})
    executor.run({})
    executor.update_dimensions({"n": 3000})  # the resident buffer grows; its first bytes must survive
    out = executor.run({})["y"]
    np.testing.assert_array_equal(out[:2], np.array([7, 8], np.float32))


def test_outputs_selection_reads_back_only_those(runtime: Runtime) -> None:
    executor = runtime.load_model(scale_plan([1024]))
    before, held = executor.stats.bytes_read_back, executor.gpu_bytes
    assert executor.run({"x": np.ones(1024, np.float32)}, outputs=[]) == {}
    assert executor.stats.bytes_read_back == before
    assert executor.gpu_bytes == held  # nor staging room for what no run has read back
    assert executor.run({"x": np.ones(1024, np.float32)}, outputs=["y"])["y"][0] == 2.0
    assert executor.stats.bytes_read_back == before + 4096
    with pytest.raises(InputError, match="not outputs"):
        executor.run({"x": np.ones(1024, np.float32)}, outputs=["nope"])


def test_aliased_output_shares_the_input_buffer(runtime: Runtime) -> None:
    """An in-place op: `state` is updated where it lives; the output is the same buffer."""
    spec = ElementwiseSpec()
    state = spec.input("state", DataType.FLOAT, [8])
    out = spec.output("state_out", DataType.FLOAT, [8])
    spec.graph.aliases[out.id] = state.id

    def plan(ctx: PlanCtx) -> None:
        assert ctx.shares_storage(0, 0)
        source = (
            "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\n"
            "@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
            "    if (g.x < #{N}) { y[g.x] = y[g.x] * 3.0; }\n}\n"
        )
        shader = ctx.compile_shader("triple_in_place", source, {}, {"N": 8})
        ctx.dispatch(shader, [], [ctx.output(0)], ceil_div(8, 64))

    executor = runtime.load_model(build_plan(spec, plan))
    executor.write_input("state", np.arange(8, dtype=np.float32))
    first = executor.run({})["state_out"]
    second = executor.run({})["state_out"]
    np.testing.assert_array_equal(second, first * 3)
    assert executor.compiled.aliases == {out.id: state.id}
