"""Shared by the Scan-lowering and Loop-unrolling tests: the oracle check, node cases, small builders."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import cache

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "assert_same_outputs",
    "const",
    "f32",
    "model",
    "node_case",
    "op_types",
    "random_feeds",
]


def f32(name: str, dims: Sequence[int | str | None] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, None if dims is None else list(dims))


def const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    opset: int = 21,
    initializers: Sequence[TensorProto] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), "main", list(inputs), list(outputs), initializer=list(initializers))
    ir = 10 if opset >= 21 else 7
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)


def op_types(graph: onnx.GraphProto) -> list[str]:
    """Every op of `graph` and of the graphs nested in it."""
    ops = []
    for node in graph.node:
        ops.append(node.op_type)
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                ops += op_types(sub)
    return ops


def random_feeds(m: onnx.ModelProto, dims: dict[str, int] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Random values for every graph input, symbolic dims from `dims` (default 4)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in m.graph.input:
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else (dims or {}).get(d.dim_param, 4) for d in tensor.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if dtype == np.bool_:
            feeds[value.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(0, 5, shape).astype(dtype)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def _run(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """`m`'s outputs in onnxruntime, fed the `feeds` it has inputs for (a baked input is not fed)."""
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return [np.asarray(v) for v in session.run(None, {k: v for k, v in feeds.items() if k in wanted})]


def assert_same_outputs(original: onnx.ModelProto, rewritten: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """The rewrite passes onnx's full check and onnxruntime gives exactly the original's outputs."""
    onnx.checker.check_model(rewritten, full_check=True)
    expected, actual = _run(original, feeds), _run(rewritten, feeds)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual, strict=True):
        assert e.dtype == a.dtype and e.shape == a.shape
        np.testing.assert_array_equal(a, e)


@cache
def _node_cases() -> dict[str, tuple[onnx.ModelProto, dict[str, np.ndarray]]]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    found = {}
    for case in cases:
        assert case.model is not None and case.data_sets is not None
        tensors_only = all(v.type.WhichOneof("value") == "tensor_type" for v in case.model.graph.input)
        if tensors_only and {"Scan", "Loop"} & set(op_types(case.model.graph)):
            inputs = case.data_sets[0][0]
            names = [v.name for v in case.model.graph.input]
            found[case.name] = (case.model, {n: np.asarray(v) for n, v in zip(names, inputs, strict=True)})
    return found


def node_case(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """An `onnx.backend.test.case.node` case holding a Scan or Loop: its model and first inputs."""
    return _node_cases()[name]


def node_case_names(prefix: str) -> list[str]:
    return sorted(name for name in _node_cases() if name.startswith(prefix))
