"""Gather/scatter family: ops whose addressing reads an index tensor at run time.

Membership: an op belongs here when a tensor of indices decides which elements are read (Gather,
GatherElements, GatherND) or written (ScatterElements, ScatterND, Scatter, OneHot); NonZero and
NonMaxSuppression write the indices others gather with (their counts read back at run time:
`nonzero`, `non_max_suppression`). GatherElements,
GatherND and the scatters share one addressing scheme and shader (`addressing`, indexed.wgsl); Gather
along one axis (`gather_axis`) and OneHot have their own. Positions fixed by shapes alone go to
`rearrange`; ops that compute indices from values (ArgMax, ArgMin) are reductions. All of them fold on
the host, the gathers and scatters on symbolic shape values too. Imports onyxia.core only (no onnx, wgpu
or onyxia.runtime).
"""

from onyxia.operators.gather_scatter.gather import GATHER_INDEXED, IndexedGatherOp
from onyxia.operators.gather_scatter.gather_axis import GATHER, GatherOp
from onyxia.operators.gather_scatter.non_max_suppression import NON_MAX_SUPPRESSION, NonMaxSuppressionOp
from onyxia.operators.gather_scatter.nonzero import NONZERO, NonZeroOp
from onyxia.operators.gather_scatter.one_hot import ONE_HOT, OneHotOp
from onyxia.operators.gather_scatter.scatter import SCATTER, IndexedScatterOp

__all__ = [
    "GATHER",
    "GATHER_INDEXED",
    "NONZERO",
    "NON_MAX_SUPPRESSION",
    "GATHER_SCATTER",
    "ONE_HOT",
    "SCATTER",
    "GatherOp",
    "IndexedGatherOp",
    "IndexedScatterOp",
    "NonMaxSuppressionOp",
    "NonZeroOp",
    "OneHotOp",
]

GatherScatterRow = GatherOp | IndexedGatherOp | IndexedScatterOp | OneHotOp | NonZeroOp | NonMaxSuppressionOp

GATHER_SCATTER: dict[str | tuple[str, int, int | None], GatherScatterRow] = {
    key: row
    for table in (GATHER, GATHER_INDEXED, SCATTER, ONE_HOT, NONZERO, NON_MAX_SUPPRESSION)
    for key, row in table.items()
}
