"""Control family: `If` and `Loop`, whose subgraphs compile into plans the host runs between segments.

Membership: an op belongs here when it holds subgraphs. Its steps are `RunSubplan`s
(`onyxia.core.plan`) rather than dispatches; the subplans come from the compiler through
`onyxia.core.subgraphs.active_subgraph_compiler`, so this family imports onyxia.core only. `Scan`
reaches the compiler as a `Loop` (`onyxia.onnx.scan_as_loop`).
"""

from onyxia.operators.control.if_op import IfOp
from onyxia.operators.control.loop_op import LoopOp

__all__ = ["CONTROL", "IfOp", "LoopOp"]

CONTROL: dict[str, IfOp | LoopOp] = {"If": IfOp(), "Loop": LoopOp()}
