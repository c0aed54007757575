"""A compile-time weight over the buffer limit, uploaded as row pieces that each fit one GPU buffer.

The runtime gives every plan tensor one buffer, and an adapter caps a buffer's size (lavapipe: 2 GiB;
`onyxia.core.bindings.max_buffer_bytes`). Phi-4-mini's untied 200064 x 3072 f32 embedding and its lm
head weight are 2.46 GB each. The ops that read such a weight already bind it in row ranges
(`PlanCtx.chunks`); when the weight is known at compile time and over the buffer limit, those ranges are
grouped into pieces (`split_pieces`), and `PlanCtx.input_chunk` binds each range in a derived constant
holding only its piece's rows, sliced lazily from the weight when the runtime uploads it. The graph
tensor itself is then never uploaded (no step binds it whole). A weight known only at run time, or
bound whole by some other step, still gets one buffer, and the runtime's size check names it.
"""

from __future__ import annotations

import numpy as np

from onyxia.core.bindings import Piece
from onyxia.core.dtypes import DataType
from onyxia.core.errors import PlanningError
from onyxia.core.ir_records import TensorDef
from onyxia.core.shapes import Absent, dims_product
from onyxia.core.symbolic import SymbolicDim
from onyxia.core.values import TensorValue

__all__ = ["gpu_nbytes", "known_data", "piece_value"]

_PACKED = frozenset({DataType.UINT4, DataType.INT4})


def gpu_nbytes(tensor: TensorDef) -> SymbolicDim:
    """Bytes of `tensor`'s GPU storage, as its plan tensor would count them (without making one)."""
    if isinstance(tensor.shape, Absent):
        raise PlanningError(f"tensor '{tensor.name}' is absent but a GPU step uses it")
    numel = dims_product(tensor.shape.dims)
    if tensor.dtype in _PACKED:
        return (numel + 1) // 2
    return numel * tensor.dtype.gpu_numpy.itemsize


def known_data(tensor: TensorDef) -> TensorValue | np.ndarray | None:
    """`tensor`'s data when it is known at compile time and can be sliced into row pieces, else None."""
    source = tensor.initializer if tensor.initializer is not None else tensor.value
    if source is None or (isinstance(source, np.ndarray) and source.dtype == object) or tensor.dtype in _PACKED:
        return None
    return source


def piece_value(tensor: TensorDef, piece: Piece) -> tuple[str, TensorValue]:
    """The constant key and lazy value of `piece`'s rows of `tensor` (`known_data`), in its dtype."""
    source = known_data(tensor)
    itemsize = tensor.dtype.gpu_numpy.itemsize
    if source is None or piece.row_bytes % itemsize:
        raise PlanningError(
            f"tensor '{tensor.name}': rows {piece.first_row}..{piece.first_row + piece.rows} of {piece.row_bytes} "
            f"bytes cannot be a piece of their own; expected compile-time data with whole {itemsize}-byte elements"
        )
    per_row = piece.row_bytes // itemsize
    start, stop = piece.first_row * per_row, (piece.first_row + piece.rows) * per_row
    key = f"{tensor.name}:rows-{piece.first_row}-{piece.first_row + piece.rows}-of-{piece.row_bytes}"

    def load() -> np.ndarray:
        data = source.numpy() if isinstance(source, TensorValue) else source
        return np.asarray(data).reshape(-1)[start:stop]  # a view: the upload copies it slice by slice

    return key, TensorValue(tensor.dtype, (stop - start,), load, name=key)
