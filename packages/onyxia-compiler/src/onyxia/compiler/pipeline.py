"""`CompilerPipeline`: Resolution -> Inference -> Folding -> Optimization -> Planning.

Each stage's passes run in registration order and repeat until none reports a change (a pass
that never settles is an error naming it). Failures are re-raised naming the pass and the passes
that ran before it. ``ONYXIA_CHECK=1`` runs `graph.check()` after every pass and
``ONYXIA_DUMP_IR=dir`` writes the graph text after each one. Compiling needs no GPU.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path

from onyxia.compiler.passes import ConstantFoldingPass, PlanningPass, ShapeInferencePass, SymbolicResolutionPass
from onyxia.core import CompiledModel, IrGraph, OnyxiaError, OperatorRegistry, Pass, Stage

__all__ = ["CompilerPipeline", "PassError", "compile"]

log = logging.getLogger(__name__)

MAX_ROUNDS = 16


class PassError(OnyxiaError):
    """A pass failed or never settled; names the pass and what ran before it."""


class CompilerPipeline:
    """The built-in passes, then the registry's default passes (`OperatorRegistry.passes`, filled by
    the operator packages), then those given to `add_pass`, each in its stage."""

    def __init__(self, registry: OperatorRegistry) -> None:
        self.registry = registry
        self._extra: list[Pass] = []
        for p in registry.passes:
            self.add_pass(p)

    def add_pass(self, p: Pass) -> CompilerPipeline:
        """Register `p`; it runs in its `stage`, after the passes registered before it."""
        if not isinstance(p.stage, Stage):
            raise TypeError(f"pass {p!r} has no valid stage")
        self._extra.append(p)
        return self

    def passes(self, dims: Mapping[str, int]) -> list[Pass]:
        built_in: list[Pass] = [
            SymbolicResolutionPass(dims),
            ShapeInferencePass(),
            ConstantFoldingPass(),
        ]
        ordered = sorted([*built_in, *self._extra], key=lambda p: p.stage)  # stable: keeps registration order
        return ordered

    def compile(self, graph: IrGraph, dims: Mapping[str, int] | None = None) -> CompiledModel:
        """Compile a copy of `graph` (the caller's graph is left as it was)."""
        dims = dict(dims or {})
        work = graph.copy()
        history: list[str] = []
        planner = PlanningPass(dims)
        stages = self.passes(dims)
        for stage in Stage:
            self._run_stage(stage, [p for p in stages if p.stage == stage], work, history)
        self._run_pass(planner, work, history)  # once, after the PLANNING passes (view aliasing) settle
        assert planner.compiled is not None
        return planner.compiled

    def _run_stage(self, stage: Stage, group: list[Pass], graph: IrGraph, history: list[str]) -> None:
        for _ in range(MAX_ROUNDS):
            changed = False
            for p in group:
                changed |= self._run_pass(p, graph, history)
            if not changed:
                return
        raise PassError(f"stage {stage.name}: passes {[p.name for p in group]} did not settle in {MAX_ROUNDS} rounds")

    def _run_pass(self, p: Pass, graph: IrGraph, history: list[str]) -> bool:
        start = time.perf_counter()
        try:
            changed = bool(p.run(graph, self.registry))
        except OnyxiaError as e:
            if history and not isinstance(e, PassError):
                e.add_note(f"in pass {p.name}, after [{', '.join(history[-8:])}]")
            raise
        except Exception as e:
            raise PassError(f"pass {p.name} failed after [{', '.join(history[-8:])}]: {type(e).__name__}: {e}") from e
        elapsed = time.perf_counter() - start
        history.append(p.name)
        if os.environ.get("ONYXIA_CHECK") == "1":
            graph.check()
        dump = os.environ.get("ONYXIA_DUMP_IR")
        if dump:
            Path(dump).mkdir(parents=True, exist_ok=True)
            Path(dump, f"{len(history):02d}-{p.name}.txt").write_text(str(graph))
        if os.environ.get("ONYXIA_PASS_STATS") == "1" or int(os.environ.get("ONYXIA_DEBUG", "0") or 0) >= 1:
            log.warning("pass %-24s changed=%-5s nodes=%-5d %.1f ms", p.name, changed, len(graph), elapsed * 1e3)
        return changed


def compile(graph: IrGraph, registry: OperatorRegistry, dims: Mapping[str, int] | None = None) -> CompiledModel:  # noqa: A001
    """One-call form of `CompilerPipeline(registry).compile(graph, dims)`."""
    return CompilerPipeline(registry).compile(graph, dims)
