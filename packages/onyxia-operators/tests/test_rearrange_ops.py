"""Transpose, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth against onnxruntime."""

import numpy as np
import pytest
from oracle import check_op

from onyxia.compiler import CompilerPipeline
from onyxia.core import DataType, GraphBuilder, ShapeInferenceError
from onyxia.operators import core_operator_registry

RNG = np.random.default_rng(3)


def _x(shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    return np.asarray(RNG.standard_normal(shape) * 10).astype(dtype)


@pytest.mark.parametrize(
    ("shape", "perm"),
    [((2, 3), None), ((2, 3, 4), [1, 0, 2]), ((1, 2, 3, 4, 5, 2), [5, 3, 1, 0, 2, 4]), ((0, 3), [1, 0]), ((), None)],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16, np.bool_])
def test_transpose(shape: tuple, perm: list | None, dtype: type) -> None:
    check_op("Transpose", {"x": _x(shape, dtype)}, {} if perm is None else {"perm": perm})


def test_transpose_symbolic() -> None:
    check_op("Transpose", {"x": _x((3, 5, 2))}, {"perm": [2, 0, 1]}, dim_params={"x": ["b", "s", 2]})


SLICES = [
    ((10,), [2], [8], [0], [1]),
    ((10,), [-3], [100], [0], [1]),
    ((10,), [9], [-100], [0], [-2]),
    ((4, 6, 5), [1, -1], [3, 0], [0, 1], [1, -1]),
    ((4, 6), [0], [2**62], [-1], [2]),
    ((3, 0, 2), [0], [1], [0], [1]),
    ((5, 5), [7], [9], [1], [1]),
]


@pytest.mark.parametrize(("shape", "starts", "ends", "axes", "steps"), SLICES, ids=str)
def test_slice(shape: tuple, starts: list, ends: list, axes: list, steps: list) -> None:
    inputs = {"x": _x(shape)}
    for name, values in (("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps)):
        inputs[name] = np.array(values, np.int64)
    check_op("Slice", inputs, initializers=["starts", "ends", "axes", "steps"])


def test_slice_symbolic_and_legacy_attributes() -> None:
    inputs = {"x": _x((6, 8))}
    inputs.update(starts=np.array([1, -3], np.int64), ends=np.array([2**62, 2**62], np.int64))
    check_op("Slice", inputs, initializers=["starts", "ends"], dim_params={"x": ["a", "b"]})
    check_op("Slice", {"x": _x((6, 8))}, {"starts": [1], "ends": [4], "axes": [1]}, opset=9)


@pytest.mark.parametrize(
    ("shape", "target"), [((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 3), (1, 1)), ((), (2, 2)), ((0, 1), (0, 3))]
)
def test_expand(shape: tuple, target: tuple) -> None:
    check_op("Expand", {"x": _x(shape), "shape": np.array(target, np.int64)}, initializers=["shape"])


def test_expand_symbolic_input() -> None:
    x = _x((4, 1))
    check_op(
        "Expand", {"x": x, "shape": np.array([2, 1, 3], np.int64)}, initializers=["shape"], dim_params={"x": ["n", 1]}
    )


@pytest.mark.parametrize(
    ("shape", "repeats"), [((2, 3), (2, 1)), ((3,), (4,)), ((2, 1, 2), (1, 3, 2)), ((0, 2), (3, 2))]
)
def test_tile(shape: tuple, repeats: tuple) -> None:
    check_op("Tile", {"x": _x(shape), "r": np.array(repeats, np.int64)}, initializers=["r"])


PADS = [(mode, pads) for mode in ("constant", "reflect", "edge", "wrap") for pads in ([1, 2, 0, 3], [0, 1, 2, 0])]


@pytest.mark.parametrize(("mode", "pads"), [*PADS, ("constant", [-1, 1, 1, -2])], ids=str)
def test_pad(mode: str, pads: list) -> None:
    inputs = {"x": _x((4, 5)), "pads": np.array(pads, np.int64), "value": np.array(1.5, np.float32)}
    check_op("Pad", inputs, {"mode": mode}, initializers=["pads", "value"], opset=19)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode: str) -> None:
    check_op("DepthToSpace", {"x": _x((2, 8, 3, 2))}, {"blocksize": 2, "mode": mode})


def test_space_to_depth() -> None:
    check_op("SpaceToDepth", {"x": _x((1, 3, 4, 6))}, {"blocksize": 2})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_mode(mode: str) -> None:
    # opset 28 added `mode`; onnxruntime does not implement that version yet
    check_op("SpaceToDepth", {"x": _x((2, 3, 4, 6))}, {"blocksize": 2, "mode": mode}, opset=28, reference="onnx")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("value", [-np.inf, np.inf, np.nan, 1e30])
def test_pad_non_finite_value(dtype: type, value: float) -> None:
    # WGSL has no inf/NaN literal and f16 cannot hold 1e30 (it rounds to inf, as onnxruntime does)
    with np.errstate(over="ignore"):
        inputs = {"x": _x((4, 5), dtype), "pads": np.array([1, 2, 0, 3], np.int64), "value": np.array(value, dtype)}
    check_op("Pad", inputs, {"mode": "constant"}, initializers=["pads", "value"], opset=19)


def test_folds_with_constant_input() -> None:
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, [3, 2])
    t = b.op("Transpose", b.constant(np.arange(6, dtype=np.float32).reshape(2, 3)), perm=[1, 0])
    b.output(b.op("Add", x, t))
    compiled = CompilerPipeline(core_operator_registry()).compile(b.graph)
    assert [op.op_type for op in compiled.operations] == ["Add"]


def test_bad_perm_is_reported() -> None:
    b = GraphBuilder()
    b.output(b.op("Transpose", b.input("x", DataType.FLOAT, [2, 3]), perm=[0, 0], _name="t"))
    with pytest.raises(ShapeInferenceError, match=r"node 't' \(Transpose.*perm \[0, 0\] is not a permutation"):
        CompilerPipeline(core_operator_registry()).compile(b.graph)


@pytest.mark.parametrize(
    ("shape", "attrs", "split", "outputs", "opset"),
    [
        ((6, 4), {"axis": 0}, [1, 2, 3], 3, 13),
        ((2, 9), {"axis": -1}, None, 3, 13),
        ((2, 10), {"axis": 1, "num_outputs": 3}, None, 3, 18),
        ((4, 6), {"axis": 1, "split": [2, 4]}, None, 2, 11),
        ((3, 0), {"axis": 0}, [1, 2], 2, 13),
    ],
    ids=str,
)
def test_split(shape: tuple, attrs: dict, split: list | None, outputs: int, opset: int) -> None:
    inputs = {"x": _x(shape)}
    if split is not None:
        inputs["split"] = np.array(split, np.int64)
    check_op("Split", inputs, attrs, num_outputs=outputs, opset=opset, initializers=["split"] if split else [])


def test_split_symbolic_leading_dim() -> None:
    check_op("Split", {"x": _x((3, 8))}, {"axis": 1, "num_outputs": 2}, num_outputs=2, dim_params={"x": ["n", 8]})
