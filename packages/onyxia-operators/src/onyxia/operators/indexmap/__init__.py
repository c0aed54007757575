"""Index-map family: Transpose, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth."""

from onyxia.operators.indexmap.family import IndexMap, IndexMapOp
from onyxia.operators.indexmap.ops import INDEXMAP

__all__ = ["INDEXMAP", "IndexMap", "IndexMapOp"]
