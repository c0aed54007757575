"""run() and update_dimensions() refuse bad inputs with messages that say where, found, expected."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from runtime_plans import SCALE_WGSL, ElementwiseSpec, build_plan, scale_plan

from onyxia.core import CompiledModel, DataType, InputError, PlanCtx, SymbolicExpr, ceil_div
from onyxia.runtime import PlanExecutor, Runtime


@pytest.fixture(scope="module")
def executor(runtime: Runtime) -> PlanExecutor:
    return runtime.load_model(scale_plan(["batch", 3]))


def _two_inputs(dims_x: list[int | str], dims_z: list[int | str]) -> CompiledModel:
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, dims_x)
    spec.input("z", DataType.FLOAT, dims_z)
    spec.output("y", DataType.FLOAT, dims_x)

    def plan(ctx: PlanCtx) -> None:
        n = ctx.builder.plan_tensor(ctx.input_tensor(0)).numel
        defs = {"T": "f32", "OUT_T": "f32", "EXPR": "x[i]", "WG": 64, "HEADER": ""}
        shader = ctx.compile_shader("scale", SCALE_WGSL, defs, {"N": n})
        ctx.dispatch(shader, [ctx.input(0)], [ctx.output(0)], ceil_div(n, 64))

    return build_plan(spec, plan)


def test_missing_input(executor: PlanExecutor) -> None:
    with pytest.raises(InputError, match=r"missing \['x'\]; the model expects exactly \['x'\]"):
        executor.run({})


def test_extra_input_lists_the_expected_ones(executor: PlanExecutor) -> None:
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(InputError, match=r"unexpected \['mask'\]; the model expects exactly \['x'\]"):
        executor.run({"x": x, "mask": x})


def test_wrong_dtype(executor: PlanExecutor) -> None:
    with pytest.raises(InputError, match=r"input 'x': dtype is float64; expected float32 \(FLOAT\)"):
        executor.run({"x": np.zeros((2, 3))})


def test_int64_given_as_int32_is_refused(runtime: Runtime) -> None:
    ids = runtime.load_model(scale_plan(["n"], DataType.INT64, "x[i]"))
    with pytest.raises(InputError, match=r"input 'x': dtype is int32; expected int64 \(INT64\)"):
        ids.run({"x": np.zeros(4, np.int32)})


def test_not_an_array(executor: PlanExecutor) -> None:
    not_arrays: dict[str, Any] = {"x": [[1.0, 2.0, 3.0]]}  # what an untyped caller may pass
    with pytest.raises(InputError, match=r"input 'x': expected a numpy array of float32, given list"):
        executor.run(not_arrays)


def test_wrong_rank(executor: PlanExecutor) -> None:
    with pytest.raises(InputError, match=r"input 'x': rank 1 \(shape \[3\]\); expected rank 2 with dims \[batch, 3\]"):
        executor.run({"x": np.zeros(3, np.float32)})


def test_wrong_static_dim(executor: PlanExecutor) -> None:
    with pytest.raises(InputError, match=r"input 'x': dim 1 is 4; expected 3 \(shape \[2, 4\]\)"):
        executor.run({"x": np.zeros((2, 4), np.float32)})


def test_symbolic_dims_must_agree_across_inputs(runtime: Runtime) -> None:
    executor = runtime.load_model(_two_inputs(["n"], ["n"]))
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(executor.run({"x": x, "z": x})["y"], x)
    with pytest.raises(InputError, match=r"input 'z': dim 0 \('n'\) is 5, but input 'x' dim 0 set 'n' to 4"):
        executor.run({"x": x, "z": np.ones(5, np.float32)})


def test_expression_dims_are_checked_not_bound(runtime: Runtime) -> None:
    executor = runtime.load_model(_two_inputs(["past + seq"], ["seq"]))
    x, z = np.ones(7, np.float32), np.ones(3, np.float32)
    with pytest.raises(InputError, match=r"input 'x': dim 0 \('past \+ seq'\) cannot be checked.*update_dimensions"):
        executor.run({"x": x, "z": z})
    executor.update_dimensions({"past": 4})
    np.testing.assert_array_equal(executor.run({"x": x, "z": z})["y"], x)
    with pytest.raises(InputError, match=r"input 'x': dim 0 \('past \+ seq'\) is 7; the current dims .* make it 6"):
        executor.run({"x": x, "z": np.ones(2, np.float32)})


def test_update_dimensions_errors(runtime: Runtime) -> None:
    executor = runtime.load_model(_two_inputs(["past + seq"], ["seq"]))
    with pytest.raises(InputError, match=r"unknown dims \['sequence'\]; the model's dims are \['past', 'seq'\]"):
        executor.update_dimensions({"sequence": 3})
    with pytest.raises(InputError, match=r"dim 'seq' = -1; expected a non-negative integer"):
        executor.update_dimensions({"seq": -1})
    executor.update_dimensions({"past": 2})  # recorded; 'seq' comes with the first run's inputs
    assert executor.stats.dimension_updates == 0 and executor.dims == {"past": 2}


def test_dims_in_no_input_shape_must_be_given(runtime: Runtime) -> None:
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, ["n"])
    spec.output("y", DataType.FLOAT, ["n", "k"])
    executor = runtime.load_model(build_plan(spec, lambda ctx: None))
    x = np.ones(3, np.float32)
    with pytest.raises(InputError, match=r"run\(\): dims \['k'\] have no value \(bound so far: \{'n': 3\}\)"):
        executor.run({"x": x})
    executor.update_dimensions({"k": 2})
    assert executor.run({"x": x})["y"].shape == (3, 2)


def test_failed_dims_change_keeps_the_old_dims(runtime: Runtime) -> None:
    spec = ElementwiseSpec()
    spec.input("x", DataType.FLOAT, ["n"])
    spec.output("y", DataType.FLOAT, ["n"])
    compiled = build_plan(spec, lambda ctx: None)
    compiled.constraints.append((SymbolicExpr.name("n"), 4, "x must hold 4 values"))
    executor = runtime.load_model(compiled, dims={"n": 4})
    with pytest.raises(InputError, match=r"\(x must hold 4 values\): 'n' = 5 but '4' = 4"):
        executor.update_dimensions({"n": 5})
    assert executor.dims == {"n": 4}
