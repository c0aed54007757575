"""Small ONNX models built in code for the end-to-end tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["attention_block"]


def attention_block(vocab: int = 32, hidden: int = 16, heads: int = 2, seed: int = 0) -> onnx.ModelProto:
    """Embedding -> scaled self-attention -> projection, with a symbolic `sequence_length`.

    Uses the foundation's operator subset, including a ``Shape -> Gather -> Concat -> Reshape``
    chain that must fold away at compile time.
    """
    rng = np.random.default_rng(seed)
    head = hidden // heads

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [
        weight("embed", vocab, hidden),
        weight("wq", hidden, hidden),
        weight("wk", hidden, hidden),
        weight("wo", hidden, hidden),
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([heads, head], np.int64), "heads_head"),
        numpy_helper.from_array(np.array([-1, hidden], np.int64), "flat"),
        numpy_helper.from_array(np.array(float(head), np.float32), "head_dim"),
    ]
    nodes = [
        helper.make_node("Gather", ["embed", "ids"], ["x"]),  # [B, S, H]
        helper.make_node("Cos", ["x"], ["xc"]),
        helper.make_node("Add", ["x", "xc"], ["x1"]),
        helper.make_node("MatMul", ["x1", "wq"], ["q"]),
        helper.make_node("MatMul", ["x1", "wk"], ["k"]),
        helper.make_node("Shape", ["q"], ["q_shape"]),
        helper.make_node("Gather", ["q_shape", "zero"], ["batch"], axis=0),
        helper.make_node("Gather", ["q_shape", "one"], ["seq"], axis=0),
        helper.make_node("Concat", ["batch", "seq", "heads_head"], ["split_shape"], axis=0),
        helper.make_node("Reshape", ["q", "split_shape"], ["q4"]),  # [B, S, heads, head]
        helper.make_node("Reshape", ["k", "split_shape"], ["k4"]),
        helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qh", "kt"], ["scores"]),  # [B, heads, S, S]
        helper.make_node("Sqrt", ["head_dim"], ["scale"]),
        helper.make_node("Div", ["scores", "scale"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
        helper.make_node("Neg", ["probs"], ["neg"]),
        helper.make_node("Sub", ["probs", "neg"], ["twice"]),
        helper.make_node("MatMul", ["twice", "qh"], ["ctx"]),  # [B, heads, S, head]
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "flat"], ["ctx2"]),  # [B*S, H]
        helper.make_node("MatMul", ["ctx2", "wo"], ["out"]),
        helper.make_node("Mul", ["out", "out"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "attention_block",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch_size", "sequence_length"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, hidden])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
