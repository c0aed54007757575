"""`RunSubplan`: control flow (`If`, `Loop`) as a plan step the host drives between segments.

A branch or a loop body is compiled into a plan of its own. At run time the executor submits the
steps before this one, then runs the subplans on the same device: their inputs are copied from the
outer plan's buffers on the GPU (bytes never visit the host), an `If`'s condition and a `Loop`'s trip
count and condition are the only values read back (none when the dims decide them), loop-carried
values stay on the GPU from one iteration to the next, and the results are copied into the outer
buffers. Output dims the subplan decides (a branch's length, a loop's iteration count) are fresh
symbols bound from the subplan's result shapes before the rest of the outer plan runs, as a
`ReadValues` step binds NonZero's count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from onyxia.core.plan import BufferRef, ReadValues
from onyxia.core.symbolic import SymbolicDim

if TYPE_CHECKING:
    from onyxia.core.plan import CompiledModel

__all__ = ["HOST_STEPS", "LoopRoles", "RunSubplan"]


@dataclass(frozen=True)
class LoopRoles:
    """What a `Loop` body's plan inputs and outputs mean (names in the body plan; None: unused).

    `carried` body outputs feed the carried inputs of the next iteration; `scanned` outputs are
    stacked along a new first axis. `condition_passthrough`: the body returns its condition input
    unchanged (or a constant true), so no iteration needs a read-back to know whether to go on."""

    iteration: str | None
    condition_in: str | None
    condition_out: str
    carried_in: tuple[str | None, ...]
    carried_out: tuple[str, ...]
    scanned: tuple[str, ...]
    condition_passthrough: bool


@dataclass
class RunSubplan:
    """One `If` (`plans` = then, else) or `Loop` (`plans` = body,) node, run by the host.

    `inputs` are the node's inputs (its own, then its subgraphs' outer-scope reads) with their dims
    under the outer plan; `feeds[p]` maps node input index -> input name of plan p. `results[p]`
    names, per node output, the plan output it is copied from (a Loop: carried outputs, then the
    stacked ones). `symbols` are the names in `output_dims` this step binds. `condition` (If) and
    `trip_count` (Loop) are set when the dims decide them, so nothing is read back for them."""

    kind: str
    node: str
    plans: tuple[CompiledModel, ...]
    inputs: tuple[BufferRef | None, ...]
    input_dims: tuple[tuple[SymbolicDim, ...], ...]
    feeds: tuple[tuple[tuple[int, str], ...], ...]
    outputs: tuple[BufferRef | None, ...]
    output_dims: tuple[tuple[SymbolicDim, ...], ...]
    results: tuple[tuple[str, ...], ...]
    symbols: tuple[str, ...]
    condition: SymbolicDim | None = None
    trip_count: SymbolicDim | None = None
    loop: LoopRoles | None = None

    def reads(self) -> tuple[BufferRef, ...]:
        return tuple(ref for ref in self.inputs if ref is not None)

    def writes(self) -> tuple[BufferRef, ...]:
        return tuple(ref for ref in self.outputs if ref is not None)


HOST_STEPS = (ReadValues, RunSubplan)
"""Steps that end a segment: the host submits what came before, then binds the dims they decide."""
