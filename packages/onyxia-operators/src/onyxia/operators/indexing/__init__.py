"""Indexing family: index-driven gathers and scatters, and the ops that compute indices.

Part of onyxia.operators (IR -> plan). GatherElements, GatherND, ScatterElements and ScatterND
share one addressing scheme and shader (`addressing.py`, indexed.wgsl); CumSum, ArgMax/ArgMin and
OneHot each walk lines along one axis with their own small shader. All of them fold on the host,
the gathers, scatters and CumSum on symbolic shape values too. Imports onyxia.core only (no onnx,
wgpu or onyxia.runtime).
"""

from onyxia.operators.indexing.arg_reduce import ARG_REDUCE, ArgReduceOp
from onyxia.operators.indexing.gather import GATHER_INDEXED, IndexedGatherOp
from onyxia.operators.indexing.one_hot import ONE_HOT, OneHotOp
from onyxia.operators.indexing.scan import CUMSUM, CumSumOp
from onyxia.operators.indexing.scatter import SCATTER, IndexedScatterOp

__all__ = [
    "ARG_REDUCE",
    "CUMSUM",
    "GATHER_INDEXED",
    "INDEXING",
    "ONE_HOT",
    "SCATTER",
    "ArgReduceOp",
    "CumSumOp",
    "IndexedGatherOp",
    "IndexedScatterOp",
    "OneHotOp",
]

IndexingRow = ArgReduceOp | CumSumOp | IndexedGatherOp | IndexedScatterOp | OneHotOp

INDEXING: dict[str | tuple[str, int, int | None], IndexingRow] = {
    key: row for table in (GATHER_INDEXED, SCATTER, CUMSUM, ARG_REDUCE, ONE_HOT) for key, row in table.items()
}
