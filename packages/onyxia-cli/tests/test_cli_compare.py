"""`onyxia compare`: onnxruntime against Onyxia node by node, through the console script's `main`.

The wrong kernel comes from an operator plugin installed the way plugins are: a distribution whose
``onyxia.operators`` entry point registers an ``Add`` that subtracts, found by `OperatorRegistry.discover`
through importlib.metadata on sys.path. The models share their shapes ([2, 8]) so the tests compile
few distinct shaders.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import CliResult, save_model
from onnx import TensorProto, helper, numpy_helper

from onyxia.cli.compare.tensors import Tolerance, compare_tensors

_PLUGIN = '''
"""A deliberately wrong Add (a - b) for onyxia compare's test: registered over the built-in one."""
from onyxia.core import DataType, OperatorBase, TensorType, UnsupportedOpError, ceil_div
from onyxia.core.shapes import dims_product

SOURCE = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= #{N}) { return; }
    y[i] = a[i] - b[i];
}
"""


class WrongAdd(OperatorBase):
    name = "Add"

    def infer_output_shapes(self, ctx):
        if ctx.input_shape(0) != ctx.input_shape(1) or ctx.input_dtype(0) != DataType.FLOAT:
            raise UnsupportedOpError("WrongAdd takes two float32 tensors of one shape")
        return [TensorType(DataType.FLOAT, ctx.input_shape(0))]

    def plan(self, ctx):
        n = dims_product(ctx.output_dims(0))
        shader = ctx.compile_shader("test::wrong_add", SOURCE, defs={}, dims={"N": n})
        ctx.dispatch(shader, reads=[ctx.input(0), ctx.input(1)], writes=[ctx.output(0)], workgroups=ceil_div(n, 64))


def register(registry):
    registry.register("Add", WrongAdd())
'''


@pytest.fixture
def wrong_add_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Install a plugin distribution (module + dist-info with the entry point) on sys.path."""
    site = tmp_path / "site"
    dist = site / "onyxia_test_wrong_add-0.1.dist-info"
    dist.mkdir(parents=True)
    (site / "onyxia_test_wrong_add.py").write_text(_PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: onyxia-test-wrong-add\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[onyxia.operators]\nwrong-add = onyxia_test_wrong_add:register\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "onyxia_test_wrong_add", raising=False)


@pytest.fixture
def chain_model(tmp_path: Path) -> Path:
    """x -> Softmax -> Add(s, x) -> Softmax -> Mul(y, 2): the Add, between two reductions, stays a node."""
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], name="first/Softmax", axis=-1),
        helper.make_node("Add", ["s", "x"], ["a"], name="middle/Add"),
        helper.make_node("Softmax", ["a"], ["p"], name="last/Softmax", axis=-1),
        helper.make_node("Mul", ["p", "two"], ["y"], name="scale"),
    ]
    value = helper.make_tensor_value_info
    return save_model(
        tmp_path / "chain.onnx",
        nodes,
        [value("x", TensorProto.FLOAT, ["batch", 8])],
        [value("y", TensorProto.FLOAT, ["batch", 8])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")],
        {"": 17},
    )


@pytest.fixture
def fused_model(tmp_path: Path) -> Path:
    """MatMul + bias Add (one MatMulGroup) -> Relu -> Mul -> Add (one FusedElementwise) -> Softmax."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"], name="dense/MatMul"),
        helper.make_node("Add", ["xw", "b"], ["h"], name="dense/Add"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "c"], ["m"], name="scale"),
        helper.make_node("Add", ["m", "x"], ["z"], name="residual"),
        helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1),
    ]
    value = helper.make_tensor_value_info
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b"),
        numpy_helper.from_array(np.array(0.5, np.float32), "c"),
    ]
    return save_model(
        tmp_path / "fused.onnx",
        nodes,
        [value("x", TensorProto.FLOAT, [2, 8])],
        [value("y", TensorProto.FLOAT, [2, 8])],
        weights,
        {"": 17},
    )


def test_wrong_kernel_is_reported_at_its_node(
    cli: Callable[..., CliResult], chain_model: Path, wrong_add_plugin: None
) -> None:
    result = cli("compare", str(chain_model), "--dim", "batch=2")
    assert result.code == 1, result.out + result.err
    out = " ".join(result.out.split())
    assert "first mismatch: node 'middle/Add' (Add), output 'a'" in out
    assert "16 of 16 elements outside tolerance" in out
    # the node's inputs: one matched on both sides, one fed as is
    assert "'first/Softmax' (Softmax)" in out and "matches" in out and "same array fed to both" in out
    # what followed read the wrong value, and is counted, not reported first
    assert "2 later node output(s) differ too" in out and "'y' of 'scale' (Mul)" in out
    assert "max abs error" in out


def test_clean_model_matches(cli: Callable[..., CliResult], chain_model: Path, tmp_path: Path) -> None:
    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)
    np.save(tmp_path / "x.npy", x)
    result = cli("compare", str(chain_model), "--input", f"x={tmp_path / 'x.npy'}")
    assert result.code == 0, result.out + result.err
    out = " ".join(result.out.split())
    assert "all 4 outputs match" in out
    assert "x float32[2, 8]" in out and "random" not in out


def test_random_inputs_default_their_dims(cli: Callable[..., CliResult], chain_model: Path) -> None:
    result = cli("compare", str(chain_model))
    assert result.code == 0, result.out + result.err
    out = " ".join(result.out.split())
    assert "x float32[1, 8] (random)" in out and "set to 1: batch" in out and "all 4 outputs match" in out


def test_fused_intermediates_are_named_not_compared(cli: Callable[..., CliResult], fused_model: Path) -> None:
    result = cli("compare", str(fused_model))
    assert result.code == 0, result.out + result.err
    out = " ".join(result.out.split())
    assert "all 3 outputs match" in out  # h (the MatMulGroup's), z (the fused chain's) and y
    assert "xw │ 'dense/MatMul' (MatMul) │ fused into 'dense/Add' (com.onyxia::MatMulGroup)" in out
    for name, node in (("r", "'relu' (Relu)"), ("m", "'scale' (Mul)")):
        assert f"{name} │ {node} │ fused into 'residual' (com.onyxia::FusedElementwise)" in out


def test_capture_compiles_what_run_compiles(fused_model: Path) -> None:
    """The plan whose tensors are compared is the plan `onyxia run` makes: same nodes, same shaders."""
    from onyxia.cli.common import load_graph, operator_registry
    from onyxia.cli.compare.capture import capture
    from onyxia.cli.compare.reference import run_reference
    from onyxia.compiler import CompilerPipeline
    from onyxia.runtime import Runtime, compiling_for

    graph = load_graph(fused_model)
    x = np.random.default_rng(0).random((2, 8), dtype=np.float32)
    ref = run_reference(fused_model, {"x": x})
    captured = capture(graph, operator_registry(), {}, {"x": x}, ref)
    with compiling_for(Runtime()):
        plain = CompilerPipeline(operator_registry()).compile(graph, {})
    assert captured.plan is not None
    assert [(op.name, op.op_type) for op in captured.plan.operations] == [
        (op.name, op.op_type) for op in plain.operations
    ]
    assert [s.source for s in captured.plan.shaders] == [s.source for s in plain.shaders]
    assert captured.plan.outputs == plain.outputs  # the extra read-backs went to a copy
    assert set(captured.values) == {"h", "z", "y"}
    np.testing.assert_allclose(captured.values["y"], ref.values["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: f"x={d / 'missing.npy'}", "missing.npy"),
        (lambda d: "x", "expected NAME=FILE.npy"),
        (lambda d: f"nope={_save(d, np.zeros((2, 8), np.float32))}", "unknown input(s) ['nope']"),
        (
            lambda d: f"x={_save(d, np.zeros((2, 8), np.float64))}",
            "input 'x' has dtype float64; the model expects float32",
        ),
        (lambda d: f"x={_save(d, np.zeros((2, 3), np.float32))}", "input 'x' dim 1 is 3; the model expects 8"),
    ],
)
def test_bad_input_exits_2(
    cli: Callable[..., CliResult], chain_model: Path, tmp_path: Path, make: Callable[[Path], str], message: str
) -> None:
    result = cli("compare", str(chain_model), "--input", make(tmp_path))
    assert result.code == 2, result.out + result.err
    assert "error:" in result.err and message in " ".join(result.err.split())


def test_missing_model_exits_2(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    result = cli("compare", str(tmp_path / "absent.onnx"))
    assert result.code == 2 and "absent.onnx" in result.err


def _save(directory: Path, array: np.ndarray) -> Path:
    path = directory / "value.npy"
    np.save(path, array)
    return path


def test_tensor_rule_integers_nan_and_scale() -> None:
    tol = Tolerance(atol=1e-5, rtol=1e-5)
    assert compare_tensors(np.array([1, 2, 3]), np.array([1, 2, 3], np.int64), tol).ok
    ints = compare_tensors(np.array([1, 2, 3]), np.array([1, 2, 4]), tol)
    assert not ints.ok and ints.exact and ints.mismatched == 1 and ints.worst_index == (2,)
    assert not compare_tensors(np.array([True, False]), np.array([True, True]), tol).ok
    nan = np.array([np.nan, 1.0, np.inf], np.float32)
    assert compare_tensors(nan, nan.copy(), tol).ok
    assert not compare_tensors(nan, np.array([0.0, 1.0, np.inf], np.float32), tol).ok
    assert not compare_tensors(nan, np.array([np.nan, 1.0, -np.inf], np.float32), tol).ok
    # the absolute term scales with the largest magnitude: 1e-3 off beside 1000 is within 1e-5 * 1000
    big = np.array([1000.0, 0.0], np.float32)
    assert compare_tensors(big, big + np.float32(1e-3), tol).ok
    assert not compare_tensors(big, big + np.float32(1e-1), tol).ok
    # half precision is never held tighter than its epsilon
    half = np.array([1.0, 2.0], np.float16)
    assert compare_tensors(half, np.array([1.0, 2.0 + 2**-9], np.float16), tol).ok
    shapes = compare_tensors(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), tol)
    assert not shapes.ok and "shapes differ" in shapes.note


def test_help_states_the_matching_rule(cli: Callable[..., CliResult]) -> None:
    result = cli("compare", "--help")
    out = " ".join(result.out.split())
    assert result.code == 0 and "How nodes are matched: by tensor name" in out and "fused into <node>" in out
