"""Movement family: ops that relabel, select, join or convert elements without arithmetic.

Part of onyxia.operators (IR -> plan): Constant and Shape always fold; Reshape, Squeeze,
Unsqueeze, Flatten and Identity plan one buffer copy; Concat, Gather and Cast have a shader each.
Shape-computation chains fold through all of them, symbolic dims included. Imports onyxia.core
only (no onnx, wgpu or onyxia.runtime).
"""

from onyxia.operators.movement.cast import CAST, CastOp
from onyxia.operators.movement.concat import CONCAT, ConcatOp
from onyxia.operators.movement.gather import GATHER, GatherOp
from onyxia.operators.movement.known import KNOWN, KnownValueOp
from onyxia.operators.movement.reshape import RESHAPE, MovementOp

__all__ = [
    "CAST",
    "CONCAT",
    "GATHER",
    "KNOWN",
    "MOVEMENT",
    "RESHAPE",
    "CastOp",
    "ConcatOp",
    "GatherOp",
    "KnownValueOp",
    "MovementOp",
]

MovementRow = KnownValueOp | MovementOp | ConcatOp | GatherOp | CastOp

MOVEMENT: dict[str | tuple[str, int, int | None], MovementRow] = {
    key: row for table in (KNOWN, RESHAPE, CONCAT, GATHER, CAST) for key, row in table.items()
}
