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
"""

from __future__ import annotations

import logging

from onyxia.core import IrGraph, OperatorRegistry, Stage
from onyxia.core.value_slots import slot_role
from onyxia.operators.family import ONYXIA_DOMAIN

__all__ = ["InsertValueReadbacksPass"]

log = logging.getLogger(__name__)

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
                graph.add_node(
                    "ReadBack", [tid], [value], domain=ONYXIA_DOMAIN, name=f"{node.name}/ReadBack", before=node
                )
                graph.set_input(node, index, value)
                known.add(value.id)
                inserted += 1
        log.info("%s: %d values read back at run time", self.name, inserted)
        return inserted > 0


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
