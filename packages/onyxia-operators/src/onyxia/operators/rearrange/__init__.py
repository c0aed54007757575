"""Rearrange family: ops that copy elements to new positions fixed by shapes and attributes alone.

Membership: an op belongs here when each output element is one input element (or Pad's constant) whose
position follows from the output coordinates, the dims and the attributes, never from tensor values:
Transpose, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth and Split share one index-map shader
(`family`, indexmap.wgsl: a new op of this kind is a function building an `IndexMap`); Concat, which
copies each input into a slab of the output, has its own (`concat`). An op whose positions come from an
index tensor goes to `gather_scatter`; one that keeps the element order (Reshape) to `shape`.
"""

from onyxia.operators.rearrange.concat import CONCAT, ConcatOp
from onyxia.operators.rearrange.family import IndexMap, IndexMapOp
from onyxia.operators.rearrange.ops import INDEXMAP
from onyxia.operators.rearrange.split import SplitOp

__all__ = ["CONCAT", "INDEXMAP", "REARRANGE", "ConcatOp", "IndexMap", "IndexMapOp", "SplitOp"]

REARRANGE: dict[str | tuple[str, int, int | None], IndexMapOp | SplitOp | ConcatOp] = {
    key: row for table in (INDEXMAP, CONCAT) for key, row in table.items()
}
