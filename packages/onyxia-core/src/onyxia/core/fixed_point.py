"""`FixedPoint`: a group of passes run to their own fixed point, itself a `Pass`.

Cleanups feed each other (CSE merges two nodes, which leaves their duplicate chain dead; DCE removes
a consumer, which makes two producers identical), so they are worth settling together wherever the
group sits in a stage, without waiting for the pipeline's next round over every pass of the stage.

It lives in onyxia.core beside the `Pass` protocol, not in onyxia.compiler, because operator
packages build their `default_passes()` with it and depend on onyxia.core only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from onyxia.core.errors import OnyxiaError
from onyxia.core.passes import Pass, Stage

if TYPE_CHECKING:
    from onyxia.core.ir_graph import IrGraph
    from onyxia.core.registry import OperatorRegistry

__all__ = ["FixedPoint"]

log = logging.getLogger(__name__)


class FixedPoint:
    """Runs `passes` in order, round after round, until a round changes nothing.

    All passes must share one stage (the group runs in it). A group still changing the graph after
    `max_rounds` rounds raises, naming the passes that changed it in the last round.
    """

    def __init__(self, passes: Sequence[Pass], *, max_rounds: int = 8, name: str | None = None) -> None:
        stages = {p.stage for p in passes}
        if len(stages) != 1:
            found = ", ".join(f"{p.name}: {p.stage.name}" for p in passes) or "no passes"
            raise ValueError(f"FixedPoint needs passes of one stage; found {found}")
        if max_rounds < 1:
            raise ValueError(f"FixedPoint max_rounds must be >= 1, got {max_rounds}")
        self.passes = list(passes)
        self.max_rounds = max_rounds
        self.stage: Stage = stages.pop()
        self.name = name or "FixedPoint-" + "+".join(p.name for p in self.passes)

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        changed = False
        for rounds in range(1, self.max_rounds + 1):
            changers = [p.name for p in self.passes if p.run(graph, registry)]
            if not changers:
                log.info("%s: settled after %d rounds", self.name, rounds)
                return changed
            changed = True
        raise OnyxiaError(f"{self.name}: passes {changers} still changed the graph after {self.max_rounds} rounds")
