"""onnxruntime's side: the model file with every node output made a graph output, optimizations off.

With ``ORT_DISABLE_ALL`` onnxruntime runs the graph node by node as written, so every node output of
the file exists under its own name; exposing them as outputs changes nothing about what is computed.
Only the top-level graph's nodes are exposed: an If branch's or a Loop body's values are per iteration
and have no name outside it. The node order is the file's, made topological (onnx requires it; a
stable sort keeps the file's order for a file that breaks the rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onyxia.core import InputError, OnyxiaError
from onyxia.onnx.topology import topological_order

__all__ = ["ModelNode", "ReferenceRun", "run_reference"]


@dataclass(frozen=True)
class ModelNode:
    """A node of the file: where it sits in topological order and what it reads and writes."""

    index: int  # in topological order
    name: str  # the file's, or the loader's for a node the file left unnamed: "<op_type>_<index in the file>"
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def label(self) -> str:
        op = f"{self.domain}::{self.op_type}" if self.domain not in ("", "ai.onnx") else self.op_type
        return f"'{self.name}' ({op})"

    @property
    def is_constant(self) -> bool:
        """A Constant node: data from the file, like an initializer, not something either engine computes."""
        return self.op_type == "Constant" and self.domain in ("", "ai.onnx")


@dataclass
class ReferenceRun:
    nodes: list[ModelNode]  # topological order
    values: dict[str, np.ndarray]  # every node output and graph output, by name
    feeds: dict[str, np.ndarray]  # the graph inputs as fed
    initializers: dict[str, Any]  # name -> TensorProto, read only when a report shows one
    graph_outputs: list[str]
    producers: dict[str, ModelNode] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.producers = {name: node for node in self.nodes for name in node.outputs if name}

    def value(self, name: str) -> np.ndarray | None:
        """Any named tensor's value on onnxruntime's side: a node output, a graph input or an initializer."""
        if name in self.values:
            return self.values[name]
        if name in self.feeds:
            return self.feeds[name]
        if name in self.initializers:
            from onnx import numpy_helper

            return numpy_helper.to_array(self.initializers[name])
        return None


def run_reference(path: Path, feeds: Mapping[str, np.ndarray]) -> ReferenceRun:
    import onnx

    ort = _onnxruntime()
    try:
        model = onnx.load(str(path))
    except Exception as e:
        raise OnyxiaError(f"onnx could not read '{path}' for onnxruntime: {e}") from e
    graph = model.graph
    nodes = _topological(graph)
    initializers = {t.name: t for t in graph.initializer}
    outputs = [o.name for o in graph.output]
    exposed = set(outputs)
    for node in nodes:
        for name in node.outputs:
            if name and name not in exposed:
                graph.output.append(onnx.ValueInfoProto(name=name))  # untyped: onnxruntime infers it
                exposed.add(name)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # its errors reach the user as ours, once, with the model's terms
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise OnyxiaError(f"onnxruntime could not load '{path}': {_first_line(e)}") from e
    names = [o.name for o in session.get_outputs()]
    try:
        results = session.run(names, dict(feeds))
    except Exception as e:
        raise InputError(f"onnxruntime refused the inputs: {_first_line(e)}") from e
    values = {name: np.asarray(value) for name, value in zip(names, results)}
    return ReferenceRun(nodes, values, dict(feeds), initializers, outputs)


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise InputError(
            "onyxia compare runs onnxruntime as the reference, and it is not installed: pip install onnxruntime"
        ) from None
    return onnxruntime


def _topological(graph: Any) -> list[ModelNode]:
    """The file's nodes in the loader's stable topological order (`onyxia.onnx.topology`), so both sides
    meet the nodes in the same order; a cycle was refused when Onyxia loaded the file."""
    raw = list(graph.node)
    order = topological_order(raw, "compare")
    return [
        ModelNode(
            k,
            raw[i].name or f"{raw[i].op_type}_{i}",  # the loader's rule (onyxia.onnx.loader), so names line up
            raw[i].op_type,
            raw[i].domain,
            tuple(raw[i].input),
            tuple(raw[i].output),
        )
        for k, i in enumerate(order)
    ]


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
