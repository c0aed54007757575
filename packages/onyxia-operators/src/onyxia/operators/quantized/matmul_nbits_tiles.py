"""MatMulNBits' tiles by M: decode (M = 1), rows (a batched decode step, M = 2 .. 8) and prefill (longer).

A batched decode step (continuous batching: B streams, one token each) is a product with M = B. Decode is bound
by reading the weights, so B rows should cost little more than one: a rows tile gives each thread all of them
(4 rows for M = 2 .. 4, 8 for M = 5 .. 8), so every weight word is loaded and unpacked once per step and used for
every row. Where subgroups are shared (the ``simd8_shared`` variant) each lane loads one of the rows of A for the
whole subgroup (matmul_nbits.wgsl's SPREAD_A).

A rows tile is the chosen variant's decode tile with more rows (in a workgroup shape of its own where the variant
lists "matmul_nbits_rows" tiles): the same threads per column group (`split`) and so the same summation order,
which with one arithmetic per row (`add_block`) makes each row's outputs bit-identical to what the decode tile
computes for that row alone, on every variant: a stream served in a batch gets exactly the tokens it gets alone. (The prefill tile may split differently; no batch of decode rows reaches
it.) The tile table itself (`onyxia.operators.matmul.tiles`) is shared with the dense kernels, hence this
module's own constants.

A symbolic M plans every tile, each dispatching workgroups only when the run's M falls in its range.
"""

from __future__ import annotations

from dataclasses import replace

from onyxia.core import PlanningError, SymbolicDim
from onyxia.operators.matmul.tiles import Tile, at_most
from onyxia.operators.matmul.variants import chosen_variant, tile_for

__all__ = ["ROWS_MAX_M", "ROWS_TILES", "SPREAD_ROWS", "nbits_tiles", "rows_tiles"]

ROWS_TILES = (4, 8)  # rows per thread of the batched decode tiles, each serving M up to its rows
ROWS_MAX_M = ROWS_TILES[-1]  # the largest batched decode step (the session's slots); longer products are prefill
SPREAD_ROWS = (4, 8)  # tiles of these many rows read A spread over the lanes of a subgroup (SPREAD_A)


def rows_tiles() -> list[Tile]:
    """The chosen variant's "matmul_nbits_rows" tiles where it lists them (their workgroup shape its own, for
    balance), else its decode tile as many rows high as each of ROWS_TILES; either way with the decode tile's
    split, which keeps each row's bits (the module docstring)."""
    decode = tile_for("matmul_nbits", 1)
    listed = chosen_variant().tiles.get("matmul_nbits_rows")
    if listed is None:
        return [replace(decode, name=f"rows{rows}", rows=rows, max_m=rows) for rows in ROWS_TILES]
    if tuple(t.rows for t in listed) != ROWS_TILES or any(t.split != decode.split for t in listed):
        raise PlanningError(
            f"matmul variant '{chosen_variant().name}': its matmul_nbits_rows tiles must have {ROWS_TILES} rows and "
            f"the decode tile's split ({decode.split}), so a batched row gets the bits it gets alone"
        )
    return list(listed)


def nbits_tiles(m: SymbolicDim) -> list[tuple[Tile, SymbolicDim]]:
    """(tile, share) of each dispatch for M = m rows (as `planned_tiles`: the share scales its workgroups, 1 or
    0 at run time for a symbolic m); tiles whose share is statically 0 are left out."""
    decode = tile_for("matmul_nbits", 1)
    tiles = [decode, *rows_tiles(), chosen_variant().tiles["matmul_nbits"][-1]]  # the last: every longer M
    planned: list[tuple[Tile, SymbolicDim]] = []
    below: SymbolicDim = 0  # 1 when m is at most the previous tile's max_m
    for tile in tiles:
        upto = 1 if tile is tiles[-1] else at_most(m, tile.max_m or 0)
        planned.append((tile, upto - below))
        below = upto
    return [(tile, share) for tile, share in planned if not (isinstance(share, int) and share == 0)]
