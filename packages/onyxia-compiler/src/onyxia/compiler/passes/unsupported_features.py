"""`UnsupportedFeatures`: one compile reports every unsupported feature, not the first.

An operator raises `UnsupportedOpError` for an attribute value, dtype or input form it does not
implement (LSTM's activation, MatMulNBits' bits, a QLinear op's zero-point dtype). Stopping at the
first one made a user fix a model one error per compile; instead shape inference and planning record
the error and go on with the nodes that do not depend on the failed one (those are skipped: their
inputs have no shape or no step, and their own errors would only repeat the first). The pass then
raises once, listing every node; a single error is re-raised as it was. When shape inference found
some, `probe_plans` also plans the nodes it could type (on a scratch builder) for the features only
planning checks (a dtype no shader stores), so the first answer is the whole one.
"""

from __future__ import annotations

from onyxia.core import IrGraph, IrNode, OperatorRegistry, PlanBuilder, PlanCtx, UnsupportedOpError

__all__ = ["UnsupportedFeatures"]


class UnsupportedFeatures:
    def __init__(self) -> None:
        self.errors: list[UnsupportedOpError] = []
        self._failed: set[int] = set()  # outputs of failed nodes and of every node downstream of one
        self._nodes: set[int] = set()  # the failed nodes themselves

    def skips(self, node: IrNode) -> bool:
        """Whether `node` reads a failed node's output (it is then failed too, silently)."""
        if any(t is not None and t in self._failed for t in node.inputs):
            self._failed.update(t for t in node.outputs if t is not None)
            return True
        return False

    def record(self, node: IrNode, error: UnsupportedOpError) -> None:
        self.errors.append(error)
        self._nodes.add(node.id)
        self._failed.update(t for t in node.outputs if t is not None)

    def probe_plans(self, graph: IrGraph, registry: OperatorRegistry) -> None:
        """Record the planning-time unsupported features of every node inference typed (only when
        inference failed somewhere, since the real planning will not run then). Other planning errors
        are left to the real planning, which reports them once these are fixed."""
        if not self.errors:
            return
        builder = PlanBuilder(graph, registry.shaders)
        for node in graph.topological_order():
            if node.id in self._nodes or self.skips(node):
                continue
            operator = registry.get(node.domain, node.op_type, node.opset)
            outputs = [graph.tensor(t) for t in node.outputs if t is not None]
            if operator is None or (outputs and all(t.value is not None for t in outputs)):
                continue
            try:
                operator.plan(PlanCtx(builder, node))
            except UnsupportedOpError as e:
                self.record(node, e)
            except Exception:  # not this probe's question: planning proper reports it
                continue

    def raise_any(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            lines = "\n".join(f"  {e}" for e in self.errors)
            raise UnsupportedOpError(f"{len(self.errors)} nodes use features that are not implemented:\n{lines}")
