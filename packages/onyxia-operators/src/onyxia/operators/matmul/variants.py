"""Kernel variants of the matrix products, chosen from the adapter's facts at compile time.

One row per variant: the conditions it needs of the adapter (`Needs`, checked against
`onyxia.core.adapter_facts.adapter_facts()`), then everything that differs between variants: the tiles of each
kernel (workgroup shape, rows and columns per invocation, split-K), the width of the weight panels, and how the
split-K threads of matmul_nbits.wgsl add their sums (workgroup memory, or subgroup shuffles with no barrier).
The first row whose needs hold is used; `force_variants({"matmul": name})` picks one by name (the tests run
every row on lavapipe that way). The chosen row's name ends every product shader's label
(``matmul/matmul_group@simd8``), so a compiled plan shows which variant each kernel took.

- ``simd8_shared``: CPU rasterisers opened with subgroups (lavapipe, as the runtime opens it): ``simd8``'s kernels,
  but the operand every lane of a subgroup reads alike (a row of a) is loaded by lane 0 alone and handed to the
  others by subgroupBroadcast (SHARED_A). lavapipe runs every storage load lane by lane, whatever the address, so
  8 lanes loading one value cost 8 loads; an elected load and a broadcast cost about one. Its tiles are one
  invocation high (WG_Y 1), so no subgroup straddles two rows whatever its size (lavapipe reports 4-128 lanes),
  and cheap rows of a pay for taller blocks.
- ``simd8``: CPU rasterisers (lavapipe runs 8 invocations per SIMD row on one thread): the tiles measured on
  lavapipe (`tiles.TILES`), 32/64-column panels that one SIMD row streams front to back, no split-K.
- ``subgroup``: GPUs with subgroups of at least 8 lanes (NVIDIA 32, AMD 32/64, Intel 8-32, Apple 32): wide
  workgroups, and a decode GEMV that splits K over 8 neighbouring lanes of one subgroup, summed by shuffles.
- ``portable``: any other device (WebGPU's default limits): the same shapes, the split-K sums added through
  workgroup memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from onyxia.core import PlanningError, SymbolicDim
from onyxia.core.adapter_facts import AdapterFacts, adapter_facts, forced_variant
from onyxia.operators.matmul.tiles import PANELS, SHARED_TILES, TILES, Tile, at_most

__all__ = [
    "FAMILY",
    "VARIANTS",
    "Needs",
    "Variant",
    "chosen_variant",
    "covering_tiles",
    "labelled",
    "panel_columns",
    "planned_tiles",
    "shared_a_defs",
    "spread8_defs",
    "tile_for",
]

FAMILY = "matmul"  # the `force_variants` key of this table
# the kernels that take SHARED_A (`shared_a_defs`)
SHARED_A_KERNELS = ("matmul_group", "matmul_gated", "matmul_nbits", "matmul_rows")


@dataclass(frozen=True)
class Needs:
    """What a variant needs of the adapter; None or 0: anything."""

    cpu: bool | None = None
    subgroups: bool = False
    min_subgroup: int = 0  # every subgroup has at least this many lanes (split-K groups stay in one subgroup)
    invocations: int = 0  # invocations per workgroup
    workgroup_storage: int = 0  # bytes of workgroup memory

    def met_by(self, facts: AdapterFacts) -> bool:
        return (
            (self.cpu is None or facts.cpu == self.cpu)
            and (not self.subgroups or facts.subgroups)
            and facts.subgroup_min_size >= self.min_subgroup
            and facts.invocations_per_workgroup >= self.invocations
            and facts.workgroup_storage_bytes >= self.workgroup_storage
        )


@dataclass(frozen=True)
class Variant:
    """One way to run the product kernels (see the module docstring)."""

    name: str
    needs: Needs
    tiles: dict[str, tuple[Tile, ...]]
    panels: dict[str, int]  # columns per weight panel: "matmul_group", "matmul_nbits" (a multiple of 4 * CG)
    subgroup_split: bool = False  # matmul_nbits: split-K sums by subgroup shuffles instead of workgroup memory
    workgroup_storage: int = field(default=16384)  # bytes a kernel may use (the decode row quantized in place)
    shared_a: bool = False  # lane 0 loads a, subgroupBroadcast shares it (SHARED_A): those kernels' tiles have WG_Y 1

    def __post_init__(self) -> None:
        tall = [f"{k}/{t.name}" for k in SHARED_A_KERNELS for t in self.tiles.get(k, ()) if t.wg_y != 1]
        if self.shared_a and tall:
            raise PlanningError(
                f"matmul variant '{self.name}': a shared row of a needs tiles one invocation high, "
                f"so no subgroup spans two rows; {', '.join(tall)} have WG_Y > 1"
            )


# GPU shapes: enough invocations per workgroup to fill a warp several times; the decode GEMVs split K over 8
# lanes so a 640-wide product still spreads over hundreds of threads.
_GPU_TILES: dict[str, tuple[Tile, ...]] = {
    "matmul": (Tile("few_rows", rows=4, wg_x=64, max_m=16), Tile("many_rows", rows=4, wg_x=16, wg_y=8)),
    "matmul_group": (
        Tile("one_row", rows=1, wg_x=64, max_m=1),
        Tile("few_rows", rows=4, wg_x=64, max_m=16),
        Tile("many_rows", rows=4, wg_x=16, wg_y=8),
    ),
    "matmul_gated": (
        Tile("one_row", rows=1, wg_x=64, max_m=1),
        Tile("few_rows", rows=4, wg_x=64, max_m=16),
        Tile("many_rows", rows=4, wg_x=16, wg_y=8),
    ),
    "matmul_rows": (Tile("rows", rows=1, columns=1, wg_x=128, max_m=1),),
    "matmul_nbits": (
        Tile("decode", rows=1, wg_x=128, column_groups=1, split=8, max_m=1),
        Tile("prefill", rows=4, wg_x=64, column_groups=2),
    ),
    "matmul_nbits_quantize": (Tile("quantize", rows=1, wg_x=128),),
}
_GPU_PANELS = {"matmul_group": 128, "matmul_nbits": 128}  # a warp's 32 lanes x 4 columns, one coalesced row

VARIANTS: tuple[Variant, ...] = (
    # min_subgroup 4: SPREAD_A tiles hand rows of a round by lanes 0 .. 3 of every subgroup
    Variant("simd8_shared", Needs(cpu=True, subgroups=True, min_subgroup=4), SHARED_TILES, PANELS, shared_a=True),
    Variant("simd8", Needs(cpu=True), TILES, PANELS),
    Variant(
        "subgroup",
        Needs(cpu=False, subgroups=True, min_subgroup=8, invocations=128),
        _GPU_TILES,
        _GPU_PANELS,
        subgroup_split=True,
    ),
    Variant("portable", Needs(invocations=128), _GPU_TILES, _GPU_PANELS),
)


def chosen_variant() -> Variant:
    """The forced variant, else the first whose needs the target adapter meets."""
    facts = adapter_facts()
    forced = forced_variant(FAMILY)
    if forced is not None:
        found = next((v for v in VARIANTS if v.name == forced), None)
        if found is None:
            raise PlanningError(
                f"matmul variants: no variant '{forced}' (known: {', '.join(v.name for v in VARIANTS)})"
            )
        return _sized(found, facts)
    for variant in VARIANTS:
        if variant.needs.met_by(facts):
            return _sized(variant, facts)
    raise PlanningError(f"matmul variants: none fits adapter {facts.describe()}")


def _sized(variant: Variant, facts: AdapterFacts) -> Variant:
    """The variant with the adapter's workgroup memory (a forced variant keeps within the device's)."""
    if variant.workgroup_storage == facts.workgroup_storage_bytes:
        return variant
    return replace(variant, workgroup_storage=facts.workgroup_storage_bytes)


def tile_for(kernel: str, m: int) -> Tile:
    """The chosen variant's tile of `kernel` for a static M: the first whose `max_m` reaches M."""
    tiles = chosen_variant().tiles
    if kernel not in tiles:
        raise PlanningError(f"matmul tile table: no kernel '{kernel}' (known: {', '.join(sorted(tiles))})")
    return next((t for t in tiles[kernel] if t.max_m is None or m <= t.max_m), tiles[kernel][-1])


def planned_tiles(kernel: str, m: SymbolicDim) -> list[tuple[Tile, SymbolicDim]]:
    """(tile, share) of each dispatch: the share (1, or 0 or 1 at run time) scales its workgroup count. A
    symbolic M dispatches every tile of the kernel from its decode tile on, each with the share that is 1 when
    M falls in its range, so a prompt of any length runs the tile a static M of its length would."""
    if isinstance(m, int):
        return [(tile_for(kernel, m), 1)]
    every = chosen_variant().tiles[kernel]
    tiles = every[every.index(tile_for(kernel, 1)) :]
    if len(tiles) == 1:
        return [(tiles[0], 1)]
    planned: list[tuple[Tile, SymbolicDim]] = []
    below: SymbolicDim = 0  # 1 when m is at most the previous tile's max_m
    for tile in tiles:
        upto = 1 if tile is tiles[-1] or tile.max_m is None else at_most(m, tile.max_m)
        planned.append((tile, upto - below))
        below = upto
    return planned


def covering_tiles(kernel: str, m: SymbolicDim) -> tuple[list[tuple[Tile, SymbolicDim]], SymbolicDim]:
    """`planned_tiles` of a kernel whose last tile may stop at its `max_m` (matmul_rows: larger M go to another
    kernel), and the share the tiles cover: 1, 0, or 1 at run time when m is at most the last tile's `max_m`."""
    last = chosen_variant().tiles[kernel][-1].max_m
    covered = 1 if last is None else at_most(m, last)
    if isinstance(covered, int):
        return (planned_tiles(kernel, m) if covered else []), covered
    *planned, (tile, share) = planned_tiles(kernel, m)
    return [*planned, (tile, share * covered)], covered


def panel_columns(kernel: str) -> int:
    """Columns per weight panel of `kernel` ("matmul_group" or "matmul_nbits") in the chosen variant."""
    return chosen_variant().panels[kernel]


def shared_a_defs(rows: int = 1) -> dict[str, bool | str]:
    """The product shaders' SHARED_A flag when the chosen variant shares a's loads across a subgroup; with `rows`
    rows of a per invocation, a multiple of 4, also SPREAD_A (each lane loads one row of every 4 for the whole
    subgroup) and QUADS, the first row of each 4 (matmul_group.wgsl and matmul_rows.wgsl)."""
    if not chosen_variant().shared_a:
        return {}
    if rows % 4:
        return {"SHARED_A": True}
    return {"SHARED_A": True, "SPREAD_A": True, "QUADS": " ".join(str(q) for q in range(0, rows, 4))}


def spread8_defs(rows: int) -> dict[str, bool | str]:
    """matmul_rows.wgsl's SPREAD8 flag, with SPREAD_A and `rows` 8: on subgroups of at least 8 lanes lane l loads
    row l of a for the whole subgroup, one load per lane where SPREAD_A's quads take two (lanes 4 .. 7 repeat
    lanes 0 .. 3's rows); the values and so the bits are the same."""
    if rows == 8 and shared_a_defs(rows).get("SPREAD_A", False):
        return {"SPREAD8": True, "A_READS": "q 8"}
    return {"A_READS": "q"}


def labelled(label: str) -> str:
    """A shader label with the chosen variant's name, so the compiled plan records it."""
    return f"{label}@{chosen_variant().name}"
