"""`CompilerPipeline`: Resolution -> Inference -> Folding -> Optimization -> Planning.

Each stage's passes run in registration order and repeat until none reports a change (a pass
that never settles is an error naming it). Failures are re-raised naming the pass and the passes
that ran before it. Every pass run is recorded as a `PassRun` (`pipeline.runs`, summed per pass in
`pipeline.stats`) and handed with the graph to the observers (`observe`): that is how
``onyxia compile --dump-dir`` writes ONNX after each pass while this package never imports onnx.
The settings (`onyxia.core.settings`, from ``ONYXIA_*`` or code) switch on more: `check` runs
`graph.check()` after every pass, `dump_ir` writes the graph text after each one (a built-in
observer), `debug >= 1` logs each run as it ends (DEBUG level otherwise) and `pass_stats` logs the
`PassStats` table at the end of each compile. A plan that computes tensors less precisely than declared
(float64 as f32: `CompiledModel.demoted`) is announced by a `DemotionWarning`.
Compiling needs no GPU.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

from onyxia.compiler.deferred import ValuesNeeded, deferred_plan
from onyxia.compiler.passes import ConstantFoldingPass, PlanningPass, ShapeInferencePass, SymbolicResolutionPass
from onyxia.compiler.passes.mark_value_inputs import MarkValueInputsPass
from onyxia.compiler.passes.record_value_checks import RecordValueChecksPass, attach_value_inputs
from onyxia.compiler.replanning import GraphReplanner
from onyxia.compiler.stats import PassRun, PassStats, aggregate, format_stats
from onyxia.core import CompiledModel, IrGraph, OnyxiaError, OperatorRegistry, Pass, PassSet, Stage
from onyxia.core.dtypes import DemotionWarning
from onyxia.core.settings import Settings, settings
from onyxia.core.subgraphs import compiling_subgraphs

__all__ = ["CompilerPipeline", "Observer", "PassError", "compile"]

log = logging.getLogger(__name__)

MAX_ROUNDS = 16

Observer = Callable[[PassRun, IrGraph], None]
"""Called after every pass run with its record and the graph as the pass left it (do not edit it)."""


class PassError(OnyxiaError):
    """A pass failed or never settled; names the pass and what ran before it."""


class CompilerPipeline:
    """The built-in passes, then the registry's default passes (`OperatorRegistry.passes`, filled by
    the operator packages), then those given to `add_pass`, each in its stage."""

    def __init__(self, registry: OperatorRegistry) -> None:
        self.registry = registry
        self._extra: list[Pass] = []
        self.pass_sets: list[str] = []
        self._observers: list[Observer] = []
        self.runs: list[PassRun] = []  # of the last (or current) compile
        for p in registry.passes:
            self.add_pass(p)

    def add_pass(self, p: Pass) -> CompilerPipeline:
        """Register `p`; it runs in its `stage`, after the passes registered before it."""
        if not isinstance(p.stage, Stage):
            raise TypeError(f"pass {p!r} has no valid stage")
        self._extra.append(p)
        return self

    def add_pass_set(self, pass_set: PassSet) -> CompilerPipeline:
        """Register every pass of `pass_set`, in order; its name is kept in `pass_sets`."""
        for p in pass_set.passes:
            self.add_pass(p)
        self.pass_sets.append(pass_set.name)
        return self

    def observe(self, observer: Observer) -> CompilerPipeline:
        """Call `observer` after every pass run of every later compile, in registration order."""
        self._observers.append(observer)
        return self

    @property
    def stats(self) -> list[PassStats]:
        """Per-pass totals of the last compile (also of one that failed, up to the failure)."""
        return aggregate(self.runs)

    def passes(self, dims: Mapping[str, int]) -> list[Pass]:
        built_in: list[Pass] = [
            SymbolicResolutionPass(dims),
            MarkValueInputsPass(dims),
            ShapeInferencePass(),
            RecordValueChecksPass(),
            ConstantFoldingPass(),
        ]
        ordered = sorted([*built_in, *self._extra], key=lambda p: p.stage)  # stable: keeps registration order
        return ordered

    def compile(self, graph: IrGraph, dims: Mapping[str, int] | None = None) -> CompiledModel:
        """Compile a copy of `graph` (the caller's graph is left as it was)."""
        dims = dict(dims or {})
        work = graph.copy()
        self.runs = []
        config = settings()
        observers = [*self._observers, *_settings_observers(config)]
        planner = PlanningPass(dims)
        stages = self.passes(dims)
        subgraphs = _SubgraphCompiles(self, dims)
        with compiling_subgraphs(subgraphs):
            compiled = self._compile_stages(graph, work, dims, planner, stages, observers, config)
        if compiled.demoted:  # Python shows a repeated warning once, so replanning at new dims stays quiet
            warnings.warn(compiled.demotion_summary(), DemotionWarning, stacklevel=2)
        return compiled

    def _compile_stages(
        self,
        graph: IrGraph,
        work: IrGraph,
        dims: dict[str, int],
        planner: PlanningPass,
        stages: list[Pass],
        observers: list[Observer],
        config: Settings,
    ) -> CompiledModel:
        try:
            for stage in Stage:
                self._run_stage(stage, [p for p in stages if p.stage == stage], work, observers)
            self._run_pass(planner, work, observers)  # once, after the PLANNING passes (view aliasing) settle
        except ValuesNeeded as needed:  # an input that shapes kernels: planned per value at run time
            deferred = deferred_plan(work, dims, needed)
            deferred.replanner = GraphReplanner(self.compile, graph, deferred.dims, config)
            return deferred
        finally:
            if config.pass_stats:
                log.warning("pass statistics:\n%s", format_stats(self.stats))
        assert planner.compiled is not None
        checks = next(p for p in stages if isinstance(p, RecordValueChecksPass))
        attach_value_inputs(planner.compiled, work, checks.checks, checks.fills)  # graph-input values that size outputs
        planner.compiled.replanner = GraphReplanner(self.compile, graph, dims, config)  # compiled dims may move
        return planner.compiled

    def _run_stage(self, stage: Stage, group: list[Pass], graph: IrGraph, observers: list[Observer]) -> None:
        for _ in range(MAX_ROUNDS):
            changed = False
            for p in group:
                changed |= self._run_pass(p, graph, observers)
            if not changed:
                return
        raise PassError(f"stage {stage.name}: passes {[p.name for p in group]} did not settle in {MAX_ROUNDS} rounds")

    def _run_pass(self, p: Pass, graph: IrGraph, observers: list[Observer]) -> bool:
        history = [r.name for r in self.runs[-8:]]
        nodes_before = len(graph)
        start = time.perf_counter()
        try:
            changed = bool(p.run(graph, self.registry))
        except OnyxiaError as e:
            if e.compiler_pass is None and not isinstance(e, PassError):
                e.compiler_pass = f"in pass {p.name}, after [{', '.join(history)}]"
            raise
        except Exception as e:
            raise PassError(f"pass {p.name} failed after [{', '.join(history)}]: {type(e).__name__}: {e}") from e
        elapsed = time.perf_counter() - start
        run = PassRun(
            index=len(self.runs) + 1,
            name=p.name,
            stage=p.stage,
            changed=changed,
            rewrites=_rewrites(p, changed),
            ms=elapsed * 1e3,
            nodes_before=nodes_before,
            nodes_after=len(graph),
        )
        self.runs.append(run)
        config = settings()
        level = logging.WARNING if config.debug >= 1 else logging.DEBUG
        log.log(
            level, "pass %03d %-24s changed=%-5s nodes=%-5d %.1f ms", run.index, p.name, changed, len(graph), run.ms
        )
        if config.check:
            try:
                graph.check()
            except OnyxiaError as e:
                e.add_note(f"ONYXIA_CHECK after pass {p.name}")
                raise
        for observer in observers:
            observer(run, graph)
        return changed


class _SubgraphCompiles:
    """The active `SubgraphCompiler` of one compile: If branches and Loop bodies compiled by a pipeline
    with the same passes (no observers: a dump shows the outer graph), at the outer compile's dims,
    each once per key (shape inference asks again every round)."""

    def __init__(self, outer: CompilerPipeline, dims: Mapping[str, int]) -> None:
        self.outer = outer
        self.dims = dict(dims)
        self.plans: dict[str, CompiledModel] = {}

    def compile_subgraph(self, graph: IrGraph, key: str) -> CompiledModel:
        if key not in self.plans:
            inner = CompilerPipeline(OperatorRegistry())
            inner.registry, inner._extra = self.outer.registry, list(self.outer._extra)
            self.plans[key] = inner.compile(graph, self.dims)
        return self.plans[key]


def _rewrites(p: Pass, changed: bool) -> int:
    """What the pass reported in `last_rewrites` for this run; 1 for a change it did not count."""
    if not changed:
        return 0
    reported = getattr(p, "last_rewrites", None)
    return reported if isinstance(reported, int) and reported > 0 else 1


def _settings_observers(config: Settings) -> list[Observer]:
    return [_text_dumper(config.dump_ir)] if config.dump_ir is not None else []


def _text_dumper(directory: Path) -> Observer:
    """The `dump_ir` setting (``ONYXIA_DUMP_IR``): the printed graph after each pass, as ``NNN-<pass>.txt``."""

    def dump(run: PassRun, graph: IrGraph) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{run.index:03d}-{run.name}.txt").write_text(str(graph))

    return dump


def compile(graph: IrGraph, registry: OperatorRegistry, dims: Mapping[str, int] | None = None) -> CompiledModel:  # noqa: A001
    """One-call form of `CompilerPipeline(registry).compile(graph, dims)`."""
    return CompilerPipeline(registry).compile(graph, dims)
