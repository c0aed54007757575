"""Node, constant and weight bookkeeping in the naming style of the onnx-community Gemma 3 exports.

Those files name every node by its module path (`/model/layers.0/attn/q_proj/MatMul`), its first output
`<node>/output_0`, and hoist deduplicated Constants named `/model/constants/<DTYPE>/<value>` to the top of
the graph in order of first use. The onnxruntime-genai builder instead writes each Constant where it is
first used, named `/model/constant_nodes/<DTYPE>/<value>` with output `/model/constants/<DTYPE>/<value>`
and Python's list spelling (`[0, -1, 64]`): `inline_constants` picks that style. Weights are only described here (`WeightSpec`); their bytes are produced
later, one at a time, so a graph for a 1 GB model costs kilobytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["GraphBuilder", "QuantizedWeightSpec", "WeightSpec"]


@dataclass(frozen=True)
class WeightSpec:
    """One float32 initializer; `kind` picks its generator in `weights.py`, `theta` is the RoPE base.

    LongRoPE's long caches divide the frequencies by `stretch` and scale cos/sin by `magnitude`."""

    name: str
    shape: tuple[int, ...]
    kind: str  # "linear" | "embedding" | "norm" | "cos" | "sin" | "inv_freq"
    theta: float = 0.0
    stretch: float = 1.0
    magnitude: float = 1.0


@dataclass(frozen=True)
class QuantizedWeightSpec:
    """A `linear` weight [K, N] stored as MatMulNBits' `<name>_Q4` uint8 [N, K/block, block/2] + `<name>_scales`."""

    source: WeightSpec
    bits: int = 4
    block_size: int = 32

    @property
    def blocks(self) -> int:
        return -(-self.source.shape[0] // self.block_size)

    @property
    def packed_name(self) -> str:
        return f"{self.source.name}_Q{self.bits}"

    @property
    def scales_name(self) -> str:
        return f"{self.source.name}_scales"


class GraphBuilder:
    """Collects nodes in execution order, Constants in order of first use and weights in order of first use."""

    def __init__(self, inline_constants: bool = False) -> None:
        self.inline_constants = inline_constants
        self.nodes: list[onnx.NodeProto] = []
        self.constants: dict[str, onnx.NodeProto] = {}
        self.weights: dict[str, WeightSpec] = {}
        self.quantized: list[QuantizedWeightSpec] = []

    def op(self, op_type: str, name: str, inputs: list[str], outputs: list[str] | None = None, **attrs: Any) -> str:
        """Append a default-domain node; return its first output (`<name>/output_0` unless given)."""
        return self._node(op_type, name, inputs, outputs, "", attrs)

    def ms_op(self, op_type: str, name: str, inputs: list[str], outputs: list[str] | None = None, **attrs: Any) -> str:
        """Append a com.microsoft contrib node (RotaryEmbedding, GroupQueryAttention, MatMulNBits)."""
        return self._node(op_type, name, inputs, outputs, "com.microsoft", attrs)

    def constant(self, value: int | float | list[int]) -> str:
        """Name of the shared Constant holding `value`: int -> INT64 scalar, list -> INT64 1-D, float -> FLOAT."""
        separator = ", " if self.inline_constants else ","
        if isinstance(value, list):
            array, text = np.array(value, dtype=np.int64), "[" + separator.join(str(v) for v in value) + "]"
        elif isinstance(value, int):
            array, text = np.array(value, dtype=np.int64), str(value)
        else:
            array, text = np.array(value, dtype=np.float32), repr(float(value))
        dtype = "INT64" if array.dtype == np.int64 else "FLOAT"
        name = f"/model/constants/{dtype}/{text}"
        if name not in self.constants:
            tensor = numpy_helper.from_array(array, name)
            node_name = name.replace("/constants/", "/constant_nodes/") if self.inline_constants else name
            self.constants[name] = helper.make_node("Constant", [], [name], name=node_name, value=tensor)
            if self.inline_constants:
                self.nodes.append(self.constants[name])
        return name

    def weight(self, name: str, shape: tuple[int, ...], kind: str, theta: float = 0.0) -> str:
        self.weights.setdefault(name, WeightSpec(name, shape, kind, theta))
        return name

    def tensor_input(self, spec: WeightSpec) -> str:
        """Register a fully described weight (a LongRoPE cache) in order of first use."""
        self.weights.setdefault(spec.name, spec)
        return spec.name

    def quantized_weight(self, name: str, shape: tuple[int, ...], block_size: int = 32) -> QuantizedWeightSpec:
        """Quantized weights come after every float initializer, as MatMulNBitsQuantizer appends them."""
        spec = QuantizedWeightSpec(WeightSpec(name, shape, "linear"), block_size=block_size)
        self.quantized.append(spec)
        return spec

    def all_nodes(self) -> list[onnx.NodeProto]:
        return list(self.nodes) if self.inline_constants else [*self.constants.values(), *self.nodes]

    def all_weights(self) -> list[WeightSpec | QuantizedWeightSpec]:
        return [*self.weights.values(), *self.quantized]

    def _node(
        self, op_type: str, name: str, inputs: list[str], outputs: list[str] | None, domain: str, attrs: dict[str, Any]
    ) -> str:
        outputs = outputs or [f"{name}/output_0"]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=name, domain=domain, **attrs))
        return outputs[0]
