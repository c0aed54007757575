"""Small ViT-shaped and BERT-shaped encoders in plain ONNX ops, spelled the way torch exports them,
for onnxruntime's transformer optimizer to fuse (Attention, SkipLayerNormalization, BiasGelu ...).

Weights are random with a fixed seed; the tests compare Onyxia with onnxruntime on the optimized
model, so no expected numbers live here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["vit_encoder"]


class _Graph:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def weight(self, *shape: int, scale: float = 0.2) -> str:
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def const(self, value: np.ndarray) -> str:
        self._n += 1
        name = f"c{self._n}"
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=f"n{self._n}", **attrs))
        return out

    def linear(self, x: str, d_in: int, d_out: int) -> str:
        return self.op("Add", self.op("MatMul", x, self.weight(d_in, d_out)), self.weight(d_out))

    def layer_norm(self, x: str, d: int) -> str:
        gamma = self.const((1 + 0.1 * self.rng.standard_normal(d)).astype(np.float32))
        return self.op("LayerNormalization", x, gamma, self.weight(d), axis=-1, epsilon=1e-12)

    def gelu(self, x: str) -> str:
        """torch's erf Gelu as exported: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        half = self.const(np.array(0.5, np.float32))
        erf = self.op("Erf", self.op("Div", x, self.const(np.array(np.sqrt(2.0), np.float32))))
        return self.op("Mul", self.op("Mul", x, half), self.op("Add", erf, self.const(np.array(1.0, np.float32))))

    def attention(self, x: str, d: int, heads: int) -> str:
        size = d // heads
        split = self.const(np.array([0, 0, heads, size], np.int64))
        q, k, v = (self.op("Reshape", self.linear(x, d, d), split) for _ in range(3))
        q = self.op("Transpose", q, perm=[0, 2, 1, 3])
        k = self.op("Transpose", k, perm=[0, 2, 3, 1])
        v = self.op("Transpose", v, perm=[0, 2, 1, 3])
        scores = self.op("Div", self.op("MatMul", q, k), self.const(np.array(np.sqrt(size), np.float32)))
        context = self.op("MatMul", self.op("Softmax", scores, axis=-1), v)
        merged = self.op(
            "Reshape", self.op("Transpose", context, perm=[0, 2, 1, 3]), self.const(np.array([0, 0, d], np.int64))
        )
        return self.linear(merged, d, d)


def vit_encoder(hidden: int = 32, heads: int = 4, layers: int = 2, patch: int = 4, image: int = 16) -> onnx.ModelProto:
    """Pre-LN ViT: Conv patches + position embeddings, `layers` blocks of LN -> attention -> residual
    -> LN -> MLP (erf Gelu) -> residual, a final LN. Input pixel_values [batch, 3, image, image]."""
    g = _Graph(seed=11)
    conv = g.op("Conv", "pixel_values", g.weight(hidden, 3, patch, patch), g.weight(hidden), strides=[patch, patch])
    side = image // patch  # position embeddings added in the Conv's layout, so the first LN reads a Transpose
    placed = g.op("Add", conv, g.weight(1, hidden, side, side))
    x = g.op("Transpose", g.op("Reshape", placed, g.const(np.array([0, hidden, -1], np.int64))), perm=[0, 2, 1])
    for _ in range(layers):
        x = g.op("Add", x, g.attention(g.layer_norm(x, hidden), hidden, heads))
        mlp = g.linear(g.gelu(g.linear(g.layer_norm(x, hidden), hidden, 2 * hidden)), 2 * hidden, hidden)
        x = g.op("Add", x, mlp)
    g.layer_norm(x, hidden)
    g.nodes[-1].output[0] = "last_hidden_state"
    inputs = [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["batch", 3, image, image])]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, None)]
    graph = helper.make_graph(g.nodes, "vit_encoder", inputs, outputs, g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
