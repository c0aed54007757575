"""Turn every node that still needs the GPU into steps; folded nodes emit nothing. Every node whose
feature is not implemented is reported at once (`UnsupportedFeatures`).

The result is a pure-data `CompiledModel` (no GPU needed to build it), kept on the pass as
`compiled` for the pipeline to return. Intermediates whose lifetimes never overlap are put in
shared buffer groups (`onyxia.compiler.storage`), after `ComputePassBatchingPass` has ordered the
operations so that lifetimes are those of the final order. The settings `share_buffers` and
`batch_passes` (``ONYXIA_SHARE_BUFFERS=0``, ``ONYXIA_BATCH_PASSES=0``) turn either off, to measure it
or to rule it out when a result looks wrong.
"""

from __future__ import annotations

import logging

from onyxia.compiler.passes.compute_pass_batching import ComputePassBatchingPass
from onyxia.compiler.passes.unsupported_features import UnsupportedFeatures
from onyxia.compiler.storage import share_buffers
from onyxia.core import (
    CompiledModel,
    IrGraph,
    OnyxiaError,
    OperatorRegistry,
    PlanBuilder,
    PlanCtx,
    PlanningError,
    Stage,
    UnsupportedOpError,
)
from onyxia.core.settings import settings

__all__ = ["PlanningPass"]

log = logging.getLogger(__name__)


class PlanningPass:
    name = "Planning"
    stage = Stage.PLANNING

    def __init__(self, dims: dict[str, int] | None = None) -> None:
        self.dims = dict(dims or {})
        self.compiled: CompiledModel | None = None

    def run(self, graph: IrGraph, registry: OperatorRegistry) -> bool:
        builder = PlanBuilder(graph, registry.shaders)
        skipped = 0
        unsupported = UnsupportedFeatures()
        for node in graph.topological_order():
            if unsupported.skips(node):
                continue
            outputs = [graph.tensor(t) for t in node.outputs if t is not None]
            operator = registry.get(node.domain, node.op_type, node.opset)
            assert operator is not None, f"{node.op_type} passed the support check"
            # folded outputs need no step, unless the op's value is symbols its own step binds (ReadBack)
            if outputs and all(t.value is not None for t in outputs) and not getattr(operator, "plans_folded", False):
                skipped += 1
                continue
            ctx = PlanCtx(builder, node)
            try:
                operator.plan(ctx)
            except UnsupportedOpError as e:  # reported with the others after the loop
                unsupported.record(node, e)
                continue
            except OnyxiaError:
                raise
            except Exception as e:
                raise PlanningError(
                    f"node '{node.name}' ({node.op_type}): planning failed: {type(e).__name__}: {e}"
                ) from e
            builder.operations.append(ctx.op)
        unsupported.raise_any()
        metadata = {"graph": graph.name, **graph.metadata}
        self.compiled = builder.finish(self.dims, metadata)
        config = settings()
        if config.batch_passes:
            ComputePassBatchingPass().run(self.compiled)
        if config.share_buffers:
            self.compiled.buffer_groups = share_buffers(self.compiled)
        log.info(
            "%s: %d ops planned, %d folded nodes skipped, %d dispatches, %d shaders",
            self.name,
            len(builder.operations),
            skipped,
            self.compiled.dispatch_count,
            len(builder.shaders),
        )
        return False
