"""Node, constant and weight bookkeeping in the style of `torch.onnx.export(dynamo=True)`.

PyTorch's exporter names nodes after its FX graph (`node_linear_3`) and values `val_N`, records each
node's module path in its `pkg.torch.onnx.name_scopes` metadata (`['', 'model', 'model.model',
'model.model.layers.0', ...]`, which is how Onyxia's dispatch count attributes a node to a layer), and
stores every constant (shape vectors, axes, `True`, the embedding scale) as an initializer, deduplicated
by value, instead of Constant nodes. Large weights are only described (`GraphBuilder`'s `WeightSpec`) and
streamed to the external data file later; the small constants are inline, as torch writes them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onyxia.cli.bench.graph_builder import GraphBuilder

__all__ = ["TorchStyleBuilder"]

NAME_SCOPES = "pkg.torch.onnx.name_scopes"
_Q4_ACCURACY_LEVEL = 4  # as the genai builder's q4 files ask (MatMulNBitsQuantizer's accuracy_level=4)


class TorchStyleBuilder:
    """Nodes in execution order with name_scopes metadata; constants as inline initializers."""

    def __init__(self) -> None:
        self.weights = GraphBuilder()  # only its weight bookkeeping: specs in order of first use
        self.nodes: list[onnx.NodeProto] = []
        self.constants: dict[tuple[str, tuple[int, ...], bytes], onnx.TensorProto] = {}

    def op(
        self,
        op_type: str,
        inputs: list[str],
        scope: str | None,
        outputs: list[str] | None = None,
        domain: str = "",
        **attrs: Any,
    ) -> str:
        """Append a node under module path `scope` ("model.model.layers.0.self_attn"; None: a node the
        quantizer wrote, `node_MatMul_<n>_Q4` without metadata); return its first output."""
        index = len(self.nodes)
        name = f"node_{op_type}_{index}" if scope is not None else f"node_MatMul_{index}_Q4"
        outputs = outputs or [f"val_{index}"]
        node = helper.make_node(op_type, inputs, outputs, name=name, domain=domain, **attrs)
        if scope is not None:
            entry = node.metadata_props.add()
            entry.key, entry.value = NAME_SCOPES, repr(["", *_module_prefixes(scope), name])
        self.nodes.append(node)
        return outputs[0]

    def const(self, value: bool | int | float | list[int] | np.ndarray) -> str:
        """An inline initializer holding `value` (bool/int/float scalar, int64 vector, or an array as it is),
        shared by value."""
        if isinstance(value, np.ndarray):
            array = value
        elif isinstance(value, bool):
            array = np.array(value)
        elif isinstance(value, float):
            array = np.array(value, dtype=np.float32)
        else:
            array = np.array(value, dtype=np.int64)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self.constants:
            self.constants[key] = numpy_helper.from_array(array, f"const_{len(self.constants)}")
        return self.constants[key].name

    def weight(self, name: str, shape: tuple[int, ...], kind: str, theta: float = 0.0) -> str:
        return self.weights.weight(name, shape, kind, theta)

    def linear(
        self, x: str, weight: str, shape: tuple[int, int], scope: str, q4: bool, output: str | None = None
    ) -> str:
        """x @ W ([in, out], as torch folds the transpose of a Linear's weight); with `q4` the MatMulNBits
        onnxruntime's `MatMulNBitsQuantizer` (4 bits, block 32, symmetric) puts in its place: named after the
        MatMul, `_Q4` appended, and without the MatMul's metadata (the quantizer keeps none)."""
        if not q4:
            return self.op("MatMul", [x, self.weight(weight, shape, "linear")], scope, [output] if output else None)
        spec = self.weights.quantized_weight(weight, shape)
        return self.op(
            "MatMulNBits",
            [x, spec.packed_name, spec.scales_name],
            None,
            [output] if output else None,
            domain="com.microsoft",
            K=shape[0],
            N=shape[1],
            accuracy_level=_Q4_ACCURACY_LEVEL,
            bits=spec.bits,
            block_size=spec.block_size,
        )

    def initializers(self) -> list[onnx.TensorProto]:
        return list(self.constants.values())


def _module_prefixes(scope: str) -> list[str]:
    """'model.model.layers.0.mlp' -> model, model.model, model.model.layers.0, model.model.layers.0.mlp
    (a ModuleList is no scope of its own: its index joins it)."""
    parts = scope.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts)) if i + 1 == len(parts) or not parts[i + 1].isdigit()]
