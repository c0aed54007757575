"""Shape family: ops about a tensor's shape, not its values.

Membership: an op belongs here when its output is its input's buffer under a new shape (Reshape,
Squeeze, Unsqueeze, Flatten, Identity: one buffer copy at most, none once `BufferAliasingPass` makes it a
view) or a value fixed at compile time by attributes and dims (Constant, Shape, Size ...: always folded,
never a GPU step). Ops that move elements to new positions go to `rearrange`, ops steered by an index
tensor to `gather_scatter`, dtype conversion (Cast) to `elementwise`.

Shape-computation chains (``Shape -> Gather -> Concat -> Reshape``) fold through all of them, symbolic dims
included; a value computed from tensor data that sizes an output goes through com.onyxia ReadBack
(`READ_BACK`), read back mid-run. Imports onyxia.core only (no onnx, wgpu or onyxia.runtime).
"""

from onyxia.operators.shape.known import KNOWN, KnownValueOp
from onyxia.operators.shape.read_back import READ_BACK, ReadBackOp
from onyxia.operators.shape.reshape import RESHAPE, MovementOp

__all__ = ["KNOWN", "READ_BACK", "RESHAPE", "SHAPE", "KnownValueOp", "MovementOp", "ReadBackOp"]

SHAPE: dict[str | tuple[str, int, int | None], KnownValueOp | MovementOp] = {
    key: row for table in (KNOWN, RESHAPE) for key, row in table.items()
}
