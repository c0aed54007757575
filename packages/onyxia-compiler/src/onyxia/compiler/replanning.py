"""`GraphReplanner`: the compiler's answer to a compiled dim that changes at run time.

A dim the caller fixed at compile time is baked into the plan (shader defs, sizes, folded values),
so a new value needs the passes again. The runtime cannot run them (it imports no compiler), so
every `CompiledModel` the pipeline returns carries this hook (`onyxia.core.plan.Replanner`): it
keeps the graph and the pipeline it was compiled by, and compiles again at the new dims, under
the settings of the first compile (an LLM session compiles inside a device-limits `override`
that has ended by the time a dim changes). The runtime caches what it returns per set of dims and
rebuilds only the pipelines whose WGSL changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from onyxia.core import CompiledModel, IrGraph, Static, Symbolic, SymbolicDim
from onyxia.core.errors import InputError
from onyxia.core.settings import Settings, override

Compile = Callable[[IrGraph, Mapping[str, int]], CompiledModel]

__all__ = ["GraphReplanner"]


class GraphReplanner:
    """Compiles `graph` again with `compiler` (a `CompilerPipeline`'s) at other values of the dims it was first
    compiled with.

    The graph is held, not copied (a compile never changes its input, and copying an LLM's graph
    costs time at every load): a caller that edits the graph after compiling gets its edits in the
    next re-plan."""

    def __init__(self, compiler: Compile, graph: IrGraph, dims: Mapping[str, int], config: Settings) -> None:
        self._compile, self._graph, self._config = compiler, graph, config
        self._names = frozenset(dims)
        shapes = [(t.name, t.shape) for t in (graph.tensor(i) for i in graph.inputs)]
        self.input_dims: dict[str, tuple[SymbolicDim, ...]] = {
            name: tuple(shape.dims) for name, shape in shapes if isinstance(shape, (Static, Symbolic))
        }

    def replan(self, dims: Mapping[str, int]) -> CompiledModel:
        """The model compiled at `dims`, which must name every dim of the first compile: a dim left out
        would turn symbolic, which is not what the caller changed. A dim added is compiled static: the
        runtime adds the dims of an equality the open plan assumed and a run broke (`BrokenAssumption`)."""
        if not self._names <= set(dims):
            raise InputError(
                f"re-plan of '{self._graph.name}': dims {sorted(dims)} given; expected at least the compiled "
                f"dims {sorted(self._names)}"
            )
        fields = {f.name: getattr(self._config, f.name) for f in dataclasses.fields(self._config)}
        with override(**fields):
            return self._compile(self._graph, dims)
