"""Seeded mutants of small valid models, for the fuzz test: what a broken exporter or a user might hand us.

Each seed is a one- or two-node model onnxruntime and Onyxia both accept; each mutation changes
one thing (an attribute's value, type or presence, the node's arity, a declared dtype or shape, the
opset or IR version, an initializer's contents, or the feeds) and says what it did in `label`, so a
failure names its case without a debugger.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["Mutant", "make_mutants"]

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32
_NP = {F: np.float32, I64: np.int64, I32: np.int32, TensorProto.BOOL: np.bool_, TensorProto.FLOAT16: np.float16}


@dataclass
class Mutant:
    case: str  # "<index>-<seed>-<mutation>", stable for a given seed
    label: str  # what was changed, e.g. "ReduceSum: attribute keepdims = 2147483648"
    model: bytes
    feeds: dict[str, np.ndarray]


def _vi(name: str, dtype: int, dims: list[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, dims)


def _model(nodes, inputs, outputs, inits=(), opset=17, extra=None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, initializer=list(inits))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in (extra or {}).items()]
    return helper.make_model(graph, opset_imports=imports, ir_version=8)


def _init(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


def _unary(op: str, **attrs) -> Callable[[], onnx.ModelProto]:
    return lambda: _model([helper.make_node(op, ["x"], ["y"], **attrs)], [_vi("x", F, [2, 3])], [_vi("y", F, None)])


SEEDS: dict[str, Callable[[], onnx.ModelProto]] = {
    "relu": _unary("Relu"),
    "leaky_relu": _unary("LeakyRelu", alpha=0.1),
    "softmax": _unary("Softmax", axis=-1),
    "transpose": _unary("Transpose", perm=[1, 0]),
    "cast": _unary("Cast", to=TensorProto.FLOAT16),
    "elu": _unary("Elu", alpha=1.0),
    "add": lambda: _model(
        [helper.make_node("Add", ["x", "b"], ["y"])], [_vi("x", F, [2, 3]), _vi("b", F, [3])], [_vi("y", F, None)]
    ),
    "reduce_sum": lambda: _model(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)],
        [_vi("x", F, [2, 3])],
        [_vi("y", F, None)],
        [_init("axes", np.array([1], np.int64))],
        opset=18,
    ),
    "reduce_max_attr": lambda: _model(
        [helper.make_node("ReduceMax", ["x"], ["y"], axes=[0], keepdims=0)],
        [_vi("x", F, [2, 3])],
        [_vi("y", F, None)],
        opset=13,
    ),
    "matmul": lambda: _model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [_vi("x", F, [2, 3])],
        [_vi("y", F, None)],
        [_init("w", np.arange(12, dtype=np.float32).reshape(3, 4))],
    ),
    "gather": lambda: _model(
        [helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)],
        [_vi("ids", I64, [4])],
        [_vi("y", F, None)],
        [_init("table", np.arange(15, dtype=np.float32).reshape(5, 3))],
    ),
    "reshape": lambda: _model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [_vi("x", F, [2, 3])],
        [_vi("y", F, None)],
        [_init("shape", np.array([3, 2], np.int64))],
    ),
    "concat": lambda: _model(
        [helper.make_node("Concat", ["x", "z"], ["y"], axis=0)],
        [_vi("x", F, [2, 3]), _vi("z", F, [1, 3])],
        [_vi("y", F, None)],
    ),
    "gemm": lambda: _model(
        [helper.make_node("Gemm", ["x", "w"], ["y"], alpha=0.5, beta=1.0, transB=1)],
        [_vi("x", F, [2, 3])],
        [_vi("y", F, None)],
        [_init("w", np.ones((4, 3), np.float32))],
    ),
    "clip_chain": lambda: _model(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["c"]), helper.make_node("Neg", ["c"], ["y"])],
        [_vi("x", F, [2, 3])],
        [_vi("y", F, None)],
        [_init("lo", np.array(-1, np.float32)), _init("hi", np.array(1, np.float32))],
    ),
    "simplified_layer_norm": lambda: _model(
        [helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], axis=-1, epsilon=1e-5)],
        [_vi("x", F, [2, 4])],
        [_vi("y", F, None)],
        [_init("g", np.ones(4, np.float32))],
    ),
    "skip_simplified_layer_norm": lambda: _model(
        [helper.make_node("SkipSimplifiedLayerNormalization", ["x", "s", "g"], ["y"], domain="com.microsoft")],
        [_vi("x", F, [1, 2, 4]), _vi("s", F, [1, 2, 4])],
        [_vi("y", F, None)],
        [_init("g", np.ones(4, np.float32))],
        extra={"com.microsoft": 1},
    ),
}

_INTS = [-1, 0, 2, 5, 99, 2**31, -(2**31), 2**32]
_FLOATS = [float("nan"), float("inf"), float("-inf"), 1e38, -1e-45, 0.0, 3.5]
_DTYPES = [F, I64, I32, TensorProto.FLOAT16, TensorProto.BOOL, TensorProto.DOUBLE, TensorProto.UINT8]
_DIMS: list[int | str] = [0, 1, 7, 2**31, 2**32, "n"]


def _node(model: onnx.ModelProto, rng: random.Random) -> onnx.NodeProto:
    return rng.choice(list(model.graph.node))


def _attr_value(m, rng):
    node = _node(m, rng)
    if not node.attribute:
        return _attr_add(m, rng)
    attr = rng.choice(list(node.attribute))
    if attr.type == onnx.AttributeProto.INT:
        attr.i = rng.choice(_INTS)
        return f"{node.op_type}: attribute {attr.name} = {attr.i}"
    if attr.type == onnx.AttributeProto.FLOAT:
        attr.f = rng.choice(_FLOATS)
        return f"{node.op_type}: attribute {attr.name} = {attr.f}"
    if attr.type == onnx.AttributeProto.INTS:
        values = [rng.choice(_INTS) for _ in range(rng.randint(0, 3))]
        attr.ClearField("ints")
        attr.ints.extend(values)
        return f"{node.op_type}: attribute {attr.name} = {values}"
    return _attr_remove(m, rng)


def _attr_add(m, rng):
    node = _node(m, rng)
    name = rng.choice(["foo", "axis", "alpha", "keepdims", "perm", "to", "epsilon"])
    value = rng.choice([1, 2.5, [1, 0], "x"])
    node.attribute.append(helper.make_attribute(name, value))
    return f"{node.op_type}: extra attribute {name} = {value!r}"


def _attr_type(m, rng):
    node = _node(m, rng)
    if not node.attribute:
        return _attr_add(m, rng)
    attr = rng.choice(list(node.attribute))
    name = attr.name
    node.attribute.remove(attr)
    value = rng.choice([1, 1.0, [1], "s"])
    node.attribute.append(helper.make_attribute(name, value))
    return f"{node.op_type}: attribute {name} retyped as {value!r}"


def _attr_remove(m, rng):
    node = _node(m, rng)
    if not node.attribute:
        return _arity_add(m, rng)
    attr = rng.choice(list(node.attribute))
    node.attribute.remove(attr)
    return f"{node.op_type}: attribute {attr.name} removed"


def _arity_add(m, rng):
    node = _node(m, rng)
    node.input.append(node.input[0])
    return f"{node.op_type}: extra input (now {len(node.input)})"


def _arity_drop(m, rng):
    node = _node(m, rng)
    if len(node.input) < 2:
        return _arity_add(m, rng)
    del node.input[-1]
    return f"{node.op_type}: last input dropped (now {len(node.input)})"


def _arity_output(m, rng):
    node = _node(m, rng)
    node.output.append("extra_out")
    return f"{node.op_type}: extra output"


def _dtype_input(m, rng):
    info = rng.choice(list(m.graph.input))
    info.type.tensor_type.elem_type = rng.choice(_DTYPES)
    return f"graph input {info.name} declared {TensorProto.DataType.Name(info.type.tensor_type.elem_type)}"


def _dtype_output(m, rng):
    info = m.graph.output[0]
    info.type.tensor_type.elem_type = rng.choice(_DTYPES)
    return f"graph output declared {TensorProto.DataType.Name(info.type.tensor_type.elem_type)}"


def _shape_input(m, rng):
    info = rng.choice(list(m.graph.input))
    dims = info.type.tensor_type.shape.dim
    choice = rng.random()
    if choice < 0.2:
        dims.add().dim_value = 1
        return f"graph input {info.name}: extra axis"
    if choice < 0.35 and len(dims):
        del dims[-1]
        return f"graph input {info.name}: axis dropped"
    dim, value = rng.choice(list(dims)), rng.choice(_DIMS)
    if isinstance(value, str):
        dim.dim_param = value
    else:
        dim.dim_value = value
    return f"graph input {info.name}: a dim = {value}"


def _version(m, rng):
    if rng.random() < 0.5:
        m.ir_version = rng.choice([1, 2, 3, 7, 10, 14, 15, 99])
        return f"IR version {m.ir_version}"
    m.opset_import[0].version = rng.choice([1, 6, 7, 11, 13, 17, 18, 21, 23, 28, 29, 999])
    return f"opset {m.opset_import[0].version}"


def _initializer(m, rng):
    if not m.graph.initializer:
        return _version(m, rng)
    tensor = rng.choice(list(m.graph.initializer))
    array = numpy_helper.to_array(tensor)
    choice = rng.random()
    if choice < 0.4:
        new = np.array([rng.choice(_INTS + [3, 6]) for _ in range(array.size)]).astype(array.dtype).reshape(array.shape)
        what = f"values {new.ravel().tolist()[:6]}"
    elif choice < 0.6:
        new = array.astype(np.int32 if array.dtype == np.int64 else np.float16)
        what = f"dtype {new.dtype}"
    elif choice < 0.8:
        new = array.reshape(-1)[: max(array.size - 1, 0)]
        what = f"shape {list(new.shape)}"
    else:
        new = np.full(array.shape, rng.choice(_FLOATS)).astype(array.dtype) if array.dtype.kind == "f" else array[::-1]
        what = f"values {new.ravel().tolist()[:6]}"
    tensor.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(new), tensor.name))
    return f"initializer {tensor.name}: {what}"


MODEL_MUTATIONS = [
    _attr_value,
    _attr_add,
    _attr_type,
    _attr_remove,
    _arity_add,
    _arity_drop,
    _arity_output,
    _dtype_input,
    _dtype_output,
    _shape_input,
    _version,
    _initializer,
]


def _feeds(model: onnx.ModelProto, rng: random.Random) -> dict[str, np.ndarray]:
    """Valid feeds for the model's inputs: symbolic or huge dims become 2, dtypes follow the declaration."""
    feeds = {}
    for info in model.graph.input:
        tensor_type = info.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value < 64 else 2 for d in tensor_type.shape.dim]
        dtype = _NP.get(tensor_type.elem_type, np.float32)
        values = np.random.default_rng(rng.randrange(2**32)).standard_normal(dims) * 3
        feeds[info.name] = (np.abs(values) % 4 if dtype in (np.int64, np.int32) else values).astype(dtype)
    return feeds


def _feed_mutation(feeds: dict[str, np.ndarray], rng: random.Random) -> str:
    name = rng.choice(sorted(feeds))
    choice = rng.random()
    if choice < 0.2:
        del feeds[name]
        return f"feed {name} missing"
    if choice < 0.4:
        feeds[name] = feeds[name].astype(np.float64 if feeds[name].dtype != np.float64 else np.int64)
        return f"feed {name} as {feeds[name].dtype}"
    if choice < 0.6:
        feeds[name] = np.zeros((*feeds[name].shape, 2), feeds[name].dtype)
        return f"feed {name} with an extra axis"
    if choice < 0.8 and feeds[name].dtype.kind == "f":
        feeds[name] = np.full(feeds[name].shape, rng.choice(_FLOATS), feeds[name].dtype)
        return f"feed {name} filled with {feeds[name].ravel()[:1].tolist()}"
    if feeds[name].dtype.kind == "i":
        feeds[name] = np.full(feeds[name].shape, rng.choice(_INTS)).astype(feeds[name].dtype)
        return f"feed {name} = {feeds[name].ravel()[:1].tolist()}"
    feeds["not_an_input"] = np.zeros(1, np.float32)
    return "feed with an unknown name"


def make_mutants(seed: int, count: int) -> list[Mutant]:
    """`count` mutants, deterministic for `seed`; one in five mutates the feeds of a valid model."""
    rng = random.Random(seed)
    names = sorted(SEEDS)
    mutants = []
    for index in range(count):
        seed_name = rng.choice(names)
        model = SEEDS[seed_name]()
        if index % 5 == 4:
            feeds = _feeds(model, rng)
            label = f"{seed_name}: {_feed_mutation(feeds, rng)}"
            mutation = "feeds"
        else:
            mutate = rng.choice(MODEL_MUTATIONS)
            label = f"{seed_name}: {mutate(model, rng)}"
            mutation = mutate.__name__.lstrip("_")
            feeds = _feeds(model, rng)
        case = f"{index:04d}-{seed_name}-{mutation}"
        mutants.append(Mutant(case, label, model.SerializeToString(), feeds))
    return mutants
