"""Subgraph attributes (If branches, Loop bodies): their outer-scope reads are explicit node inputs.

ONNX lets a subgraph read any name of the scopes around it. In the IR each such read is an input of
the node that holds the subgraph, after the node's own inputs, and a graph input of every subgraph
of that node, after its own inputs, in the same order (attribute `CAPTURED_INPUTS` counts them). So
every pass on the outer graph sees the dependency (order, dead code, buffer lifetimes) without
looking inside, and a subgraph compiles like a model whose inputs are bound from the outer plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from onyxia.core.errors import PlanningError
from onyxia.core.ir_graph import IrGraph
from onyxia.core.ir_records import IrNode
from onyxia.core.plan import CompiledModel

__all__ = [
    "CAPTURED_INPUTS",
    "SubgraphCompiler",
    "active_subgraph_compiler",
    "captured_inputs",
    "compiling_subgraphs",
    "nodes_within",
    "own_inputs",
    "subgraphs_of",
]

CAPTURED_INPUTS = "onyxia_captured_inputs"
"""Node attribute: how many of the node's last inputs are its subgraphs' outer-scope reads."""


def subgraphs_of(node: IrNode) -> dict[str, IrGraph]:
    """The node's graph-valued attributes by name (empty for an ordinary node)."""
    return {name: value for name, value in node.attributes.items() if isinstance(value, IrGraph)}


def nodes_within(graph: IrGraph) -> Iterator[IrNode]:
    """The graph's nodes, each followed by those of its subgraphs (If branches, Loop bodies), at any depth."""
    for node in graph.nodes:
        yield node
        for subgraph in subgraphs_of(node).values():
            yield from nodes_within(subgraph)


def captured_inputs(node: IrNode) -> list[int | None]:
    """The node's inputs that its subgraphs read from the outer scope."""
    count = int(node.attributes.get(CAPTURED_INPUTS, 0))
    return node.inputs[len(node.inputs) - count :] if count else []


def own_inputs(node: IrNode) -> list[int | None]:
    """The node's inputs as the op's schema lists them (the captured reads left out)."""
    count = int(node.attributes.get(CAPTURED_INPUTS, 0))
    return node.inputs[: len(node.inputs) - count] if count else list(node.inputs)


class SubgraphCompiler(Protocol):
    """Compiles a subgraph whose inputs the caller has typed (or given values) into a plan of its own.

    Operators cannot import the compiler, so `CompilerPipeline.compile` makes itself the active one
    (`active_subgraph_compiler`) while it runs; `If` and `Loop` ask it for their branch and body plans."""

    def compile_subgraph(self, graph: IrGraph, key: str) -> CompiledModel:
        """The plan of `graph` under the outer compile's dims; `key` caches it within that compile."""
        ...


_ACTIVE: ContextVar[SubgraphCompiler | None] = ContextVar("onyxia_subgraph_compiler", default=None)


@contextmanager
def compiling_subgraphs(compiler: SubgraphCompiler) -> Iterator[None]:
    """Make `compiler` the one `active_subgraph_compiler` returns inside the block."""
    token = _ACTIVE.set(compiler)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_subgraph_compiler(where: str) -> SubgraphCompiler:
    compiler = _ACTIVE.get()
    if compiler is None:
        raise PlanningError(f"{where}: subgraphs compile only inside CompilerPipeline.compile")
    return compiler
