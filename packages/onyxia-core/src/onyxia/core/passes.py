"""The pass protocol: a standalone object that edits a graph in place and says if it changed it.

Passes are registered on the `CompilerPipeline`, never owned by operators; the pipeline runs each
stage's passes to a fixed point in stage order.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from onyxia.core.ir_graph import IrGraph
    from onyxia.core.registry import OperatorRegistry

__all__ = ["Pass", "Stage"]


class Stage(enum.IntEnum):
    """Pipeline stages, in the order they run."""

    RESOLUTION = 0  # bind the dims the caller fixed
    INFERENCE = 1  # shapes and dtypes of every tensor (folding as it goes)
    FOLDING = 2  # compile-time values
    OPTIMIZATION = 3  # rewrites
    PLANNING = 4  # GPU steps


@runtime_checkable
class Pass(Protocol):
    """A pass that can count its work may also set ``last_rewrites: int`` in each `run` (how many
    rewrites that run applied); the pipeline's `PassStats` counts 1 per changed run otherwise. It is
    not a protocol member, so passes without it still satisfy `Pass`."""

    name: str
    stage: Stage

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        """Edit `graph` in place; return True when anything changed."""
        ...
