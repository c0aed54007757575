"""A compiled (static) dim that changes: the executor switches to the plan variant for the new value,
building only the pipelines whose WGSL changed, and switching back builds none. A plan without a
replanner refuses the change where it is asked for, naming the dim."""

from __future__ import annotations

import numpy as np
import pytest

from onyxia.compiler import CompilerPipeline
from onyxia.core import BufferRef, CompiledModel, DataType, Dispatch, GraphBuilder, InputError, TensorRole
from onyxia.operators import core_operator_registry
from onyxia.runtime import PlanExecutor, Runtime
from onyxia.runtime.pipelines import layout_signature

N, M = 3, 64  # rows (symbolic "n"), length of the k-free branch


def _compile(k: int) -> CompiledModel:
    """y = ReduceSum(Relu(x), axis 1) over x[n, k] (the reduction's length is a shader def once k is
    compiled), u = Exp(z) * w over z[64]: nothing of that branch depends on k."""
    b = GraphBuilder("variants")
    x = b.input("x", DataType.FLOAT, ["n", "k"])
    z = b.input("z", DataType.FLOAT, [M])
    w = b.initializer("w", np.linspace(0.5, 2.0, M, dtype=np.float32))
    axes = b.initializer("axes", np.array([1], np.int64))
    b.output(b.op("ReduceSum", b.op("Relu", x), axes, keepdims=0), b.op("Mul", b.op("Exp", z), w))
    return CompilerPipeline(core_operator_registry()).compile(b.graph, {"k": k})


def _pipelines(plan: CompiledModel) -> set[tuple[str, str, int, tuple[tuple[int, bool], ...]]]:
    """What the executor's pipeline cache keys on, per dispatch (the uniform rewrite maps equal
    sources to equal sources, so differences between plans are the same on either path)."""
    keys = set()
    for op in plan.operations:
        for step in op.steps:
            if isinstance(step, Dispatch):
                s = plan.shaders[step.shader_index]
                keys.add((s.source, s.entry_point, s.immediate_size, layout_signature(step)))
    return keys


def _check(executor: PlanExecutor, k: int, rng: np.random.Generator) -> None:
    x = rng.standard_normal((N, k)).astype(np.float32)
    z = rng.standard_normal(M).astype(np.float32)
    y, u = executor.output_names
    out = executor.run({"x": x, "z": z})
    np.testing.assert_allclose(out[y], np.maximum(x, 0).sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[u], np.exp(z) * np.linspace(0.5, 2.0, M, dtype=np.float32), rtol=1e-5)


def test_a_compiled_dim_rebuilds_only_the_pipelines_whose_source_changed(any_runtime: Runtime) -> None:
    rng = np.random.default_rng(10)
    small = _compile(4)
    executor = any_runtime.load_model(small)
    stats = executor.stats
    _check(executor, 4, rng)
    built = stats.pipelines_created
    assert built == len(_pipelines(small)) and stats.replans == 0

    _check(executor, 6, rng)  # an input of a new shape along k: the run() path re-plans
    large = executor.compiled
    new = _pipelines(large) - _pipelines(small)
    assert large.dims == {"k": 6} and (stats.replans, stats.plan_switches) == (1, 1)
    assert 0 < len(new) < len(_pipelines(large))  # the reduction's shader changed, the k-free branch did not
    assert stats.pipelines_created - built == len(new)
    assert executor.buffer_bytes("x") >= N * 6 * 4  # the input's buffer grew with k

    built, modules = stats.pipelines_created, stats.shader_modules_created
    _check(executor, 4, rng)  # back: the cached variant, nothing compiled
    executor.update_dimensions({"k": 6})  # and forth, through update_dimensions
    _check(executor, 6, rng)
    assert (stats.pipelines_created, stats.shader_modules_created) == (built, modules)
    assert (stats.replans, stats.plan_switches) == (1, 3)


def test_a_switch_keeps_weights_and_resident_inputs_in_their_buffers(runtime: Runtime) -> None:
    rng = np.random.default_rng(11)
    executor = runtime.load_model(_compile(4), dims={"k": 5})  # load_model's dims switch too
    assert executor.compiled.dims == {"k": 5} and executor.stats.replans == 1
    weights = [BufferRef(tensor=t.id) for t in executor.compiled.tensors.values() if t.role is TensorRole.WEIGHT]
    assert weights
    before = {ref: executor._pool.get(ref) for ref in weights}
    z = rng.standard_normal(M).astype(np.float32)
    executor.write_input("z", z)  # resident: later runs leave it out
    executor.update_dimensions({"k": 7})
    assert all(executor._pool.get(ref) is buffer for ref, buffer in before.items())  # not uploaded again
    assert executor.stats.buffers_adopted >= len(weights) + 1  # the weights and z's buffer
    x = rng.standard_normal((N, 7)).astype(np.float32)
    y, u = executor.output_names
    out = executor.run({"x": x})
    np.testing.assert_allclose(out[y], np.maximum(x, 0).sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[u], np.exp(z) * np.linspace(0.5, 2.0, M, dtype=np.float32), rtol=1e-5)


def test_without_a_replanner_a_compiled_dim_change_is_refused_where_it_is_asked(runtime: Runtime) -> None:
    rng = np.random.default_rng(12)
    by_hand = _compile(4)
    by_hand.replanner = None  # as a plan built without the compiler would be
    executor = runtime.load_model(by_hand)
    with pytest.raises(InputError, match=r"update_dimensions\(\).*'k' compiled as 4, asked for 5.*no replanner"):
        executor.update_dimensions({"k": 5})
    assert executor.dims["k"] == 4 and executor.stats.plan_switches == 0
    _check(executor, 4, rng)  # nothing was accepted: the plan runs as before
    with pytest.raises(InputError, match=r"input 'x': dim 1 is 5; expected 4"):
        _check(executor, 5, rng)
    with pytest.raises(InputError, match=r"load_model\(\).*'k' compiled as 4, asked for 3"):
        runtime.load_model(by_hand, dims={"k": 3})


def test_carried_state_is_carried_on_across_a_switch(runtime: Runtime) -> None:
    """carry() pairs are registered by name, so the variant keeps copying the output into the input."""
    rng = np.random.default_rng(13)
    executor = runtime.load_model(_compile(4))
    y, u = executor.output_names
    w = np.linspace(0.5, 2.0, M, dtype=np.float32)
    z = (0.1 * rng.standard_normal(M)).astype(np.float32)
    executor.carry({"z": u})  # after each run, u becomes the next run's z on the GPU
    first = executor.run({"x": rng.standard_normal((N, 4)).astype(np.float32), "z": z})[u]
    x = rng.standard_normal((N, 8)).astype(np.float32)
    out = executor.run({"x": x})  # k moves to 8, and z is what the last run left
    assert executor.compiled.dims == {"k": 8} and executor.stats.plan_switches == 1
    np.testing.assert_allclose(out[y], np.maximum(x, 0).sum(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[u], np.exp(first) * w, rtol=1e-4)
    again = executor.run({"x": x})[u]  # the variant's own run carried its u into z
    np.testing.assert_allclose(again, np.exp(out[u]) * w, rtol=1e-4)


def test_a_plan_waiting_for_a_compiled_dim_loads_without_sizing_by_it() -> None:
    """A plan whose compiled dim is still UNSPECIALIZED (-1: no run has given its value) sizes nothing by it
    at load: '3 * h' would be -3. Its first run's shapes switch to the variant for the value."""
    from onyxia.core.plan_values import UNSPECIALIZED

    b = GraphBuilder("waiting")
    x = b.input("x", DataType.FLOAT, [3, "h"])
    b.output(b.op("Relu", x))
    plan = CompilerPipeline(core_operator_registry()).compile(b.graph, {"h": 4})
    waiting = CompiledModel([], [], {t: plan.tensors[t] for t in plan.inputs}, plan.inputs, [], [])
    waiting.dims, waiting.replanner = {"h": UNSPECIALIZED}, plan.replanner
    executor = Runtime().load_model(waiting)
    x_value = np.array([[-1.0, 2.0, -3.0, 4.0]] * 3, np.float32)
    (y,) = executor.run({"x": x_value}).values()
    np.testing.assert_array_equal(y, np.maximum(x_value, 0))
    assert executor.stats.replans == 1


def _add_plan() -> CompiledModel:
    """x[a, 4] + y[b, 4]: the open compile assumes a == b (a constraint checked per run)."""
    b = GraphBuilder("assumed")
    b.output(b.op("Add", b.input("x", DataType.FLOAT, ["a", 4]), b.input("y", DataType.FLOAT, ["b", 4])))
    return CompilerPipeline(core_operator_registry()).compile(b.graph, {})


def test_a_broken_assumption_re_plans_only_where_the_plan_is_marked_for_it() -> None:
    """An unmarked plan refuses dims that break its assumption (unequal dims there are the caller's
    mistake); one marked `REPLAN_ASSUMPTIONS` (onyxia.ort's) compiles the constraint's dims at their values."""
    from onyxia.runtime.variants import REPLAN_ASSUMPTIONS

    feeds = {"x": np.ones((1, 4), np.float32), "y": np.arange(12, dtype=np.float32).reshape(3, 4)}
    plain = Runtime().load_model(_add_plan())
    with pytest.raises(InputError, match="break an assumption the model was compiled under"):
        plain.run(feeds)
    marked_plan = _add_plan()
    marked_plan.metadata[REPLAN_ASSUMPTIONS] = "yes"
    marked = Runtime().load_model(marked_plan)
    (out,) = marked.run(feeds).values()
    np.testing.assert_array_equal(out, feeds["y"] + 1)
    assert marked.compiled.dims == {"a": 1, "b": 3} and marked.stats.replans == 1
