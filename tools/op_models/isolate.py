"""Each op the tools introduce, cut out of the file that holds it into a one-node model.

The node keeps everything the tool gave it (attributes, weights, scales, zero points, domain,
opset); its inputs are the values onnxruntime computes there on the recorded inputs, so an
isolated QLinearConv sees the uint8 activations the whole model produces and a failure points at
one op. Inputs that are constant in the source (initializers, Constant nodes' outputs) stay
initializers, as kernels that need constant weights or scales expect; the rest become graph inputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

__all__ = ["ISOLATED_OPS", "isolate", "pick_nodes"]

# (domain, op_type) the quantizers, the transformer optimizer and the exporters introduce
ISOLATED_OPS: tuple[tuple[str, str], ...] = (
    ("", "DynamicQuantizeLinear"),
    ("", "MatMulInteger"),
    ("", "ConvInteger"),
    ("", "QuantizeLinear"),
    ("", "DequantizeLinear"),
    ("", "QLinearConv"),
    ("", "QLinearMatMul"),
    ("com.microsoft", "QLinearAdd"),
    ("com.microsoft", "QLinearMul"),
    ("com.microsoft", "QLinearSoftmax"),
    ("com.microsoft", "QLinearSigmoid"),
    ("com.microsoft", "QLinearLeakyRelu"),
    ("com.microsoft", "QLinearConcat"),
    ("com.microsoft", "QLinearAveragePool"),
    ("com.microsoft", "QLinearReduceMean"),
    ("com.microsoft", "QAttention"),
    ("com.microsoft", "QLinearGlobalAveragePool"),
    ("com.microsoft", "QGemm"),
    ("com.microsoft", "EmbedLayerNormalization"),
    ("com.microsoft", "Attention"),
    ("com.microsoft", "SkipLayerNormalization"),
    ("com.microsoft", "BiasGelu"),
    ("com.microsoft", "FastGelu"),
    ("", "LSTM"),
    ("", "GRU"),
    ("", "STFT"),
)


_SHORT = {np.uint8: "u8", np.int8: "s8", np.int32: "i32", np.int64: "i64", np.uint16: "u16", np.int16: "s16"}


def pick_nodes(models: dict[str, Path], inputs: dict[str, dict[str, np.ndarray]]) -> dict[str, tuple[str, int]]:
    """`op_<Op>[_<its inputs' integer types, distinct, in order>]` -> (model name, node index): the
    first node of each op and integer-type signature (MatMulInteger u8 x s8 and u8 x u8 are different
    kernels), in the order models are given, among nodes fed by at least one computed value."""
    found: dict[str, tuple[str, int]] = {}
    for name, path in models.items():
        model = onnx.load(str(path))
        constants = _constants(model)
        nodes = [
            (i, n)
            for i, n in enumerate(model.graph.node)
            if (n.domain if n.domain != "ai.onnx" else "", n.op_type) in ISOLATED_OPS
            and any(x and x not in constants for x in n.input)
        ]
        if not nodes:
            continue
        values = _values(model, list(dict.fromkeys(x for _, n in nodes for x in n.input if x)), inputs[name])
        for i, node in nodes:
            ints = dict.fromkeys(
                _SHORT[values[x].dtype.type] for x in node.input if x and values[x].dtype.type in _SHORT
            )
            found.setdefault("_".join(["op", node.op_type, *(["".join(ints)] if ints else [])]), (name, i))
    return found


def _values(model: onnx.ModelProto, names: list[str], inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The named intermediate values, from onnxruntime with graph optimizations off (names kept)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(names, inputs)))


def _constants(model: onnx.ModelProto) -> set[str]:
    graph = model.graph
    return {i.name for i in graph.initializer} | {o for n in graph.node if n.op_type == "Constant" for o in n.output}


def isolate(source: Path, index: int, inputs: dict[str, np.ndarray], dst: Path) -> dict[str, np.ndarray]:
    """Write node `index` of `source` as a model of its own at `dst`; returns its inputs' values."""
    model = onnx.load(str(source))
    node = model.graph.node[index]
    used = [n for n in node.input if n]
    values = _values(model, used, inputs)
    constants = _constants(model)
    graph_inputs, initializers, feeds = [], [], {}
    for name in dict.fromkeys(used):
        value = values[name]
        if name in constants:
            initializers.append(numpy_helper.from_array(value, name))
        else:
            dtype = helper.np_dtype_to_tensor_dtype(value.dtype)
            graph_inputs.append(helper.make_tensor_value_info(name, dtype, value.shape))
            feeds[name] = value
    outputs = [onnx.ValueInfoProto(name=o) for o in node.output if o]
    graph = helper.make_graph([node], f"{node.op_type}_isolated", graph_inputs, outputs, initializers)
    single = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name="op_models.isolate")
    single.ir_version = model.ir_version
    # outputs' types: from onnxruntime's run of the one-node model
    session = ort.InferenceSession(single.SerializeToString(), providers=["CPUExecutionProvider"])
    del single.graph.output[:]
    for meta, out in zip(session.get_outputs(), session.run(None, feeds)):
        dtype = helper.np_dtype_to_tensor_dtype(out.dtype)
        single.graph.output.append(helper.make_tensor_value_info(meta.name, dtype, out.shape))
    onnx.save(single, str(dst))
    return feeds
