"""Bind the dims the caller fixed (``{"batch_size": 1}``) everywhere they appear.

What `dims` does not bind stays symbolic and becomes an immediate at planning time, so one plan
serves every sequence length.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from onyxia.core import IrGraph, OperatorRegistry, Stage, Symbolic, shape_of

__all__ = ["SymbolicResolutionPass"]

log = logging.getLogger(__name__)


class SymbolicResolutionPass:
    name = "SymbolicResolution"
    stage = Stage.RESOLUTION

    def __init__(self, dims: Mapping[str, int] | None = None) -> None:
        self.dims = dict(dims or {})

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        changed = 0
        for tensor in graph.tensors:
            if isinstance(tensor.shape, Symbolic):
                resolved = shape_of(tensor.shape.dims, self.dims)
                if resolved != tensor.shape:
                    tensor.shape = resolved
                    changed += 1
        log.info("%s: resolved shapes of %d tensors", self.name, changed)
        return changed > 0
