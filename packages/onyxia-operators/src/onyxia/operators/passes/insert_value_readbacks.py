"""`InsertValueReadbacksPass`: a value computed from tensor data that sizes an output is read back.

A Reshape target computed by a few integer ops over a tensor's *data* (a duration predictor's
lengths, a mask's sum), or a Range limit taken from data, cannot fold at compile time. Instead of
failing, the value goes through a com.onyxia ReadBack node (`operators.shape.read_back`): its
output is one dim symbol per element, so inference plans everything after it at symbolic sizes,
and at run time the runtime reads those few words back mid-run and binds them (one extra submit,
no recompilation). Values that fold (constants, ``Shape -> Gather -> Concat`` chains, graph inputs
`MarkValueInputsPass` bound on the host) are left alone, so a model that needed no read-back
still needs none: the test is structural (every input of the producing chain known), decided
before inference, and a chain it misjudges as unknown only costs the ReadBack's fold to the value.
A float value that is ``Cast<float>`` of an integer (a VITS frame count as a float Range limit) is
read as that integer, the ReadBack presenting it as the float (`ReadBackOp`'s ``to``).
"""

from __future__ import annotations

import logging

from onyxia.core import DataType, IrGraph, IrNode, OperatorRegistry, Stage
from onyxia.core.value_slots import slot_role
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["InsertValueReadbacksPass"]

log = logging.getLogger(__name__)

_INTEGERS = frozenset({DataType.INT64, DataType.INT32})
_FLOATS = frozenset({DataType.FLOAT, DataType.DOUBLE})  # float16 holds integers exactly only to 2048
_CODES = frozenset(int(d) for d in DataType)
_ALWAYS_KNOWN = frozenset({"Constant", "Shape", "Size"})  # values from attributes and dims, never data


class InsertValueReadbacksPass:
    name = "InsertValueReadbacks"
    stage = Stage.RESOLUTION

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        known = _known_tensors(graph)
        inserted = 0
        for node in graph.topological_order():
            if node.domain not in ("", "ai.onnx"):
                continue
            for index, tid in enumerate(node.inputs):
                if tid is None or tid in known or slot_role(graph, node, index) != "value":
                    continue
                source = graph.tensor(tid)
                value = graph.add_tensor(f"{source.name}:value", source.dtype, source.shape)
                read, attributes = _integer_before_cast(graph, tid)
                graph.add_node(
                    "ReadBack",
                    [read],
                    [value],
                    attributes,
                    domain=ONYXIA_DOMAIN,
                    name=f"{node.name}/ReadBack",
                    before=node,
                )
                graph.set_input(node, index, value)
                known.add(value.id)
                inserted += 1
        log.info("%s: %d values read back at run time", self.name, inserted)
        return inserted > 0


def _integer_before_cast(graph: IrGraph, tid: int) -> tuple[int, dict[str, int] | None]:
    """What to read for `tid`: the integer behind it when `tid` is ``Cast<float>`` of an integer
    (read as that integer, presented as the float: `ReadBackOp`), else `tid` itself. ReadBack reads
    integers only, and a float bound that is a Cast of one is that integer exactly."""
    cast = graph.tensor_producer(tid)
    if cast is None or not _is_cast(cast) or cast.inputs[0] is None:
        return tid, None
    if _dtype(graph, cast.inputs[0]) not in _INTEGERS or _dtype(graph, tid) not in _FLOATS:
        return tid, None
    return cast.inputs[0], {"to": int(_dtype(graph, tid))}


def _is_cast(node: IrNode) -> bool:
    return node.op_type == "Cast" and node.domain in ("", "ai.onnx")


def _dtype(graph: IrGraph, tid: int) -> DataType:
    """`tid`'s dtype before inference: declared, or the ``to`` of the Cast that writes it (UNDEFINED
    otherwise, which matches no rule)."""
    tensor, producer = graph.tensor(tid), graph.tensor_producer(tid)
    if tensor.dtype != DataType.UNDEFINED or producer is None or not _is_cast(producer):
        return tensor.dtype
    to = int(producer.attributes.get("to", 0))
    return DataType(to) if to in _CODES else DataType.UNDEFINED  # a bad `to` is the Cast's own error


def _known_tensors(graph: IrGraph) -> set[int]:
    """Tensors whose value folds at compile time, judged by structure: constants and marked inputs,
    outputs of Constant/Shape/Size and ReadBack, and outputs of nodes whose inputs are all known."""
    known = {t.id for t in graph.tensors if t.value is not None or t.initializer is not None}
    for node in graph.topological_order():
        own = node.domain in ("", "ai.onnx") and node.op_type in _ALWAYS_KNOWN
        read = node.domain == ONYXIA_DOMAIN and node.op_type == "ReadBack"
        if own or read or all(t is None or t in known for t in node.inputs):
            known.update(t for t in node.outputs if t is not None)
    return known
