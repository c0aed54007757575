"""`PlanCtx.constant`: derived host data (a repacked weight) planned as a WEIGHT buffer."""

import numpy as np
import pytest

from onyxia.core import (
    BufferRef,
    DataType,
    GraphBuilder,
    PlanBuilder,
    PlanCtx,
    PlanningError,
    ShaderLibrary,
    TensorRole,
    TensorValue,
)


def _plan_ctx() -> PlanCtx:
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, [8])
    packed = b.initializer("packed", np.arange(8, dtype=np.uint8))
    b.op("Custom", x, packed)
    return PlanCtx(PlanBuilder(b.graph, ShaderLibrary()), b.graph.nodes[0])


def _words(calls: list[int]) -> TensorValue:
    def load() -> np.ndarray:
        calls.append(1)
        return np.arange(8, dtype=np.uint8).view("<u4")

    return TensorValue(DataType.UINT32, (2,), load, name="words")


def test_constant_is_a_lazy_weight_outside_the_graph_ids() -> None:
    ctx = _plan_ctx()
    calls: list[int] = []
    ref = ctx.constant("packed:u32", _words(calls))
    assert ref.tensor is not None and ref.tensor < 0  # graph ids are >= 0
    entry = ctx.builder.tensors[ref.tensor]
    assert (entry.name, entry.dtype, entry.dims, entry.role) == ("packed:u32", DataType.UINT32, (2,), TensorRole.WEIGHT)
    assert entry.nbytes == 8 and not calls  # the loader runs at upload, not while planning
    assert isinstance(entry.data, TensorValue)
    assert entry.data.numpy().tolist() == [0x03020100, 0x07060504] and calls == [1]


def test_same_key_shares_one_buffer_and_the_source_is_not_planned() -> None:
    ctx = _plan_ctx()
    first = ctx.constant("packed:u32", _words([]))
    assert ctx.constant("packed:u32", _words([])) == first
    other = ctx.constant("scale", np.ones(3, np.float32))  # a plain array works too
    assert other != first and isinstance(other, BufferRef)
    model = ctx.builder.finish({}, {})
    # the graph's uint8 tensor was never bound with input(1), so only the derived words are uploaded
    assert sorted(t.name for t in model.tensors.values()) == ["packed:u32", "scale", "x"]


def test_same_key_with_other_contents_is_refused() -> None:
    ctx = _plan_ctx()
    ctx.constant("k", np.zeros(4, np.uint32))
    with pytest.raises(PlanningError, match=r"constant 'k' is registered as uint32\[4\]; .* float\[4\]"):
        ctx.constant("k", np.zeros(4, np.float32))
    with pytest.raises(PlanningError, match="constant 'b'.*no WebGPU storage type"):
        ctx.constant("b", np.zeros(2, np.complex64))
