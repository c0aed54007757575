"""Every matmul kernel's tile shapes in one table, and the one rule that picks a tile by M.

A tile is what one invocation and one workgroup of a product kernel cover: `rows` output rows by
`columns` * `column_groups` output columns per invocation, `wg_x` by `wg_y` invocations per workgroup, and
`split` invocations sharing one column group (splitting K). Each kernel lists its tiles by increasing `max_m`,
the largest static M (rows of the product) a tile serves; the last tile serves every larger M (matmul_rows'
last may have a `max_m`: MatMulTransB then takes larger M to matmul.wgsl). The numbers were measured on
lavapipe (the reasons stand beside each row); they are the ``simd8`` row of `onyxia.operators.matmul.variants`,
whose other rows hold other devices' tiles (`tile_for` and `planned_tiles` there read the chosen row).

A batched decode step (continuous batching: B streams, one token each) is a product with M = B. Decode is bound
by reading the weights, so B rows should cost little more than one: the ``simd8_shared`` rows4 and rows8 tiles
give every invocation all the rows, so each weight is loaded once per step and used for every row, and each lane
of a subgroup loads one row of a for all of them (SPREAD_A). Every tile of a kernel sums each output in one
order, so row r of a batch is bit-identical to the one-row product of that row alone: a stream served in a batch
gets exactly the tokens it gets alone.

A symbolic M is the sequence length: 1 on a decode step, the prompt's length on prefill. It plans every
tile of the kernel (the decode tile, then those for larger M), and each tile outside the run's M gets
zero workgroups at run time (`at_most`; 0-size dispatches are skipped), so one plan serves every length
with the tile a static M would pick.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from onyxia.core import SymbolicDim

__all__ = ["PANELS", "SHARED_TILES", "TILES", "Tile", "at_most", "narrowed"]


@dataclass(frozen=True)
class Tile:
    """One block shape of a product kernel (see the module docstring)."""

    name: str
    rows: int
    wg_x: int
    wg_y: int = 1
    column_groups: int = 1
    split: int = 1
    max_m: int | None = None  # the largest static M this tile serves; None: every M
    columns: int = 4  # output columns per column group (matmul_rows.wgsl: rows of b, each a whole K)

    @property
    def workgroup_size(self) -> int:
        return self.wg_x * self.wg_y

    @property
    def rows_per_workgroup(self) -> int:
        return self.rows * self.wg_y

    @property
    def columns_per_workgroup(self) -> int:
        return self.columns * self.column_groups * self.wg_x // self.split

    @property
    def block_defs(self) -> dict[str, int | str]:
        """The shader defs of matmul.wgsl and matmul_group.wgsl."""
        return {
            "ROWS": self.rows,
            "ROW_ITEMS": " ".join(str(i) for i in range(self.rows)),
            "WG_X": self.wg_x,
            "WG_Y": self.wg_y,
        }


_FEW_ROWS_LIMIT = 16
# matmul.wgsl and matmul_group.wgsl: tall 8-row blocks in 16x4 workgroups for many rows; for few rows one
# 64-wide row of invocations, so no invocation computes only padding.
_FEW_ROWS = Tile("few_rows", rows=4, wg_x=64, max_m=_FEW_ROWS_LIMIT)
_MANY_ROWS = Tile("many_rows", rows=8, wg_x=16, wg_y=4)

TILES: dict[str, tuple[Tile, ...]] = {
    # MatMul of runtime operands; its one-row steps go to matmul_rows.wgsl when they can
    "matmul": (_FEW_ROWS, _MANY_ROWS),
    # MatMulGroup, GatedMatMul and MatMul by a compile-time weight: decode steps one row, 16 wide (enough
    # workgroups for every CPU thread at N = 256)
    "matmul_group": (Tile("one_row", rows=1, wg_x=16, max_m=1), _FEW_ROWS, _MANY_ROWS),
    # GatedMatMul (matmul_group.wgsl with GATED): the same tiles here; its invocations keep two blocks of sums
    "matmul_gated": (Tile("one_row", rows=1, wg_x=16, max_m=1), _FEW_ROWS, _MANY_ROWS),
    # matmul_rows.wgsl: one row of a times b stored [N, K], 2 rows of b per invocation; more rows of a go to
    # matmul.wgsl here (without subgroups each lane would load every row of a itself)
    "matmul_rows": (Tile("rows", rows=1, columns=2, wg_x=64, max_m=1),),
    # matmul_nbits.wgsl (K 640, N 2048): decode 0.25 ms; splitting K over threads costs more in barriers
    # than it gains (split 8: 2-3x slower); 8 columns per thread beat 4 by ~12% (each load of a serves more
    # columns); prefill at M = 37 takes 8 ms with 4 rows x 8 columns per thread, 20 ms with the decode
    # tile; 32-thread decode workgroups beat 64 by ~15% at N 1024 (4 workgroups, not 2, for 2 CPU
    # threads). A discrete GPU would want split 8-32 for decode, to keep enough threads in flight.
    "matmul_nbits": (
        Tile("decode", rows=1, wg_x=32, column_groups=2, max_m=1),
        Tile("prefill", rows=4, wg_x=64, column_groups=2),
    ),
    # matmul_nbits_quantize.wgsl: one invocation per (row, block) of A
    "matmul_nbits_quantize": (Tile("quantize", rows=1, wg_x=64),),
}

# The ``simd8_shared`` variant's tiles (variants.py): lane 0 loads a and a subgroup broadcast shares it (one row),
# or each lane loads one of 4 rows and broadcasts hand them round (SPREAD_A, tiles of 4 and 8 rows), so every tile
# is one invocation high (each subgroup within one block of rows) and, a being cheap, taller blocks pay.
# Gemma 3 270m's products (q/k/v, o, gate/up, down; process CPU ms of the four, lavapipe): one row 4.0, the
# former 4-row x 64 tile 6.0 at M 2-4 and 11.1 at M 8; rows4 4.9 at M 2-4, rows8 6.3 at M 8, 12 at M 16 and 88
# at M 128 (the former 16-row x 32 tile: 21 at M 16, 127 at M 128; a 16-row tile gained only past M 32).
_SPREAD_ROWS = (Tile("rows4", rows=4, wg_x=16, max_m=4), Tile("rows8", rows=8, wg_x=16))
SHARED_TILES: dict[str, tuple[Tile, ...]] = {
    **TILES,
    "matmul_group": (TILES["matmul_group"][0], *_SPREAD_ROWS),
    # two blocks of sums per invocation (gate and up), the same tiles
    "matmul_gated": (TILES["matmul_gated"][0], *_SPREAD_ROWS),
    # the tied lm head (262144 x 640 f32) per step, process CPU ms: 1 row 125; 8 rows 550 by matmul.wgsl, 265 by
    # rows8 (4 rows of b per invocation: 2 left a's loads and broadcasts a larger share, 310; 8 strained the
    # prefetchers, 280); prefill by rows8 in blocks of 8 rows (M 16: 520 against 1150)
    "matmul_rows": (
        TILES["matmul_rows"][0],
        Tile("rows4", rows=4, columns=4, wg_x=64, max_m=4),
        Tile("rows8", rows=8, columns=4, wg_x=64),
    ),
    "matmul_nbits": (TILES["matmul_nbits"][0], Tile("prefill", rows=8, wg_x=64, column_groups=2)),
    # MatMulNBits' batched decode tiles (matmul_nbits_tiles.py): the decode tile with 4 or 8 rows, one 8-lane SIMD
    # row per workgroup (64 columns) rather than the decode tile's 32 invocations: at 8 rows a workgroup is ~8x a
    # decode one's work, so 4-5 of them (Qwen2.5-0.5B's q/k/v, o and down at 256 columns each) left one CPU thread
    # idle for up to a workgroup's time. Qwen2.5-0.5B q4 step, GPU ms (A/B, 3 processes each): 8 rows 91.4 -> 89.5
    # (the products 25.6 -> 23.0), 3 rows 65.4 -> 57.7; Gemma 3 270m 8 rows 95.5 -> 93.8. (At one row the decode
    # tile's 32 stay: 8 gained on the small products and lost as much on the lm head's 2,374 workgroups.)
    "matmul_nbits_rows": (
        Tile("rows4", rows=4, wg_x=8, column_groups=2, max_m=4),
        Tile("rows8", rows=8, wg_x=8, column_groups=2, max_m=8),
    ),
}


def narrowed(tile: Tile, n: int) -> Tile:
    """`tile` with no more invocations across than N columns need (a power of two, at least one 8-lane SIMD
    row): the 128-column shared tile on a 64-column product (magika's [6144, 257] x [257, 64]) left half its
    lanes on padding, 104 ms against 68 for the 64-column simd8 tile."""
    lanes = max(8, 1 << (max(1, -(-n // (tile.columns * tile.column_groups))) - 1).bit_length())
    return replace(tile, wg_x=lanes) if tile.split == 1 and lanes < tile.wg_x else tile


# Columns per panel of a repacked compile-time weight (see `weights`): lavapipe runs a workgroup's invocations
# 8 at a time (one SIMD row), so a panel is 8 invocations x 4 * column_groups columns, one for all of a
# kernel's tiles (the same upload serves decode and prefill).
PANELS: dict[str, int] = {"matmul_group": 8 * 4, "matmul_nbits": 8 * 4 * 2}


def at_most(m: SymbolicDim, limit: int) -> SymbolicDim:
    """1 when m <= limit else 0 (for m >= 0): a literal for a static m, else an expression the runtime
    evaluates per run."""
    if isinstance(m, int):
        return int(m <= limit)
    return ((limit + 1) // (m + 1) + limit) // (limit + 1)
