"""Liveness-based buffer sharing (`share_buffers`): which buffers share, which never do, and that no
two members of a group are ever live in the same operation."""

from __future__ import annotations

import numpy as np
import pytest

from onyxia.compiler import CompilerPipeline
from onyxia.compiler.storage import share_buffers
from onyxia.core import (
    BufferRef,
    CompiledModel,
    CopyBuffer,
    DataType,
    Dispatch,
    GraphBuilder,
    OperatorRegistry,
    TensorDef,
    TensorRole,
)
from onyxia.core.settings import override
from onyxia.operators import core_operator_registry


@pytest.fixture(scope="module")
def registry() -> OperatorRegistry:
    """Without FuseElementwise: the elementwise chains below would fuse into one node, and these tests
    need their intermediates."""
    registry = core_operator_registry()
    registry.passes = [p for p in registry.passes if p.name != "FuseElementwise"]
    return registry


def _chain(*ops: str) -> GraphBuilder:
    b = GraphBuilder("chain")
    t = b.input("x", DataType.FLOAT, ["seq", 4])
    for op in ops:
        t = b.op(op, t)
    b.output(t)
    return b


def _refs(compiled: CompiledModel, *names: str) -> tuple[BufferRef, ...]:
    return tuple(BufferRef(tensor=compiled.tensor_by_name(n).id) for n in names)


def test_a_chain_shares_every_other_intermediate(registry: OperatorRegistry) -> None:
    """Relu -> Exp -> Neg -> Sigmoid: Relu's output is dead once Exp ran, so Neg's output reuses it;
    Exp's output is still read by Neg, which writes its own output, so those two never share."""
    compiled = CompilerPipeline(registry).compile(_chain("Relu", "Exp", "Neg", "Sigmoid").graph)
    assert compiled.buffer_groups == [_refs(compiled, "Relu_out0", "Neg_out0")]
    owners = compiled.storage_owners()
    assert owners == {_refs(compiled, "Neg_out0")[0]: _refs(compiled, "Relu_out0")[0]}


def test_sharing_can_be_turned_off(registry: OperatorRegistry) -> None:
    with override(share_buffers=False):
        assert CompilerPipeline(registry).compile(_chain("Relu", "Exp", "Neg", "Sigmoid").graph).buffer_groups == []


def test_inputs_outputs_weights_and_views_of_outputs_never_share(registry: OperatorRegistry) -> None:
    """x -> Relu -> Exp -> Neg -> Reshape (a graph output): Neg's output is an output's storage."""
    b = GraphBuilder("pinned")
    x = b.input("x", DataType.FLOAT, ["seq", 4])
    t = b.op("Neg", b.op("Exp", b.op("Relu", b.op("Mul", x, b.initializer("w", np.ones(4, np.float32))))))
    b.output(b.op("Reshape", t, b.initializer("shape", np.array([-1], np.int64))))
    compiled = CompilerPipeline(registry).compile(b.graph)
    grouped = {ref for group in compiled.buffer_groups for ref in group}
    assert grouped == set(_refs(compiled, "Mul_out0", "Exp_out0"))
    assert compiled.tensors[compiled.tensor_by_name("Neg_out0").id].role is TensorRole.INTERMEDIATE


def _ranges(compiled: CompiledModel) -> dict[BufferRef, set[int]]:
    """Operations each storage root (views resolved, groups not) is bound in."""
    owners = compiled.storage_owners(groups=False)
    live: dict[BufferRef, set[int]] = {}
    for index, op in enumerate(compiled.operations):
        refs = [BufferRef(scratch=s.id) for s in op.scratch]
        for step in op.steps:
            if isinstance(step, Dispatch):
                refs += [b.buffer for b in step.bindings]
            elif isinstance(step, CopyBuffer):
                refs += [step.src, step.dst]
        for ref in refs:
            live.setdefault(owners.get(ref, ref), set()).add(index)
    return live


def _block(b: GraphBuilder, x: TensorDef, i: int) -> TensorDef:
    """A residual MLP block with a scratch-using Sum and reshapes that become views."""
    w = b.initializer(f"w{i}", np.full((4, 8), 0.1, np.float32))
    v = b.initializer(f"v{i}", np.full((8, 4), 0.1, np.float32))
    h = b.op("Reshape", b.op("Relu", b.op("MatMul", x, w)), b.initializer(f"s{i}", np.array([-1, 2, 4], np.int64)))
    h = b.op("Reshape", b.op("Sum", h, h, h), b.initializer(f"t{i}", np.array([-1, 8], np.int64)))
    return b.op("Add", x, b.op("MatMul", h, v))


def test_group_members_are_never_live_in_the_same_operation(registry: OperatorRegistry) -> None:
    b = GraphBuilder("blocks")
    x = b.input("x", DataType.FLOAT, ["seq", 4])
    for i in range(3):
        x = _block(b, x, i)
    b.output(x)
    compiled = CompilerPipeline(registry).compile(b.graph)
    live = _ranges(compiled)
    assert compiled.buffer_groups and compiled.aliases
    assert any(member.scratch is not None for group in compiled.buffer_groups for member in group)
    for group in compiled.buffer_groups:
        for i, a in enumerate(group):
            for other in group[i + 1 :]:
                assert not live[a] & live[other], f"{a} and {other} are both live in ops {live[a] & live[other]}"
    assert share_buffers(compiled) == compiled.buffer_groups  # deterministic
