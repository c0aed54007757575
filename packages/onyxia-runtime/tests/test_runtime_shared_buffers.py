"""Shared storage in the buffer pool: a view chain resolves to its root's buffer, a buffer group is
one buffer sized for its largest member, and both stay right as dims grow and shrink."""

from __future__ import annotations

import numpy as np

from onyxia.compiler import CompilerPipeline
from onyxia.core import BufferRef, DataType, GraphBuilder
from onyxia.operators import core_operator_registry
from onyxia.runtime import Runtime
from onyxia.runtime.layout import buffer_sizes


def _graph() -> GraphBuilder:
    """Relu, then three views of it (Unsqueeze, Flatten, Reshape to [n, 1]), a [n, 8] Tile reduced back to [n]
    by ReduceMax, then Exp, Neg, Sigmoid: intermediates of two sizes, so groups mix sizes."""
    b = GraphBuilder("shared")
    x = b.input("x", DataType.FLOAT, ["n"])
    view = b.op("Flatten", b.op("Unsqueeze", b.op("Relu", x), b.initializer("axes", np.array([0], np.int64))))
    wide = b.op(
        "Tile",
        b.op("Reshape", view, b.initializer("col", np.array([-1, 1], np.int64))),
        b.initializer("reps", np.array([1, 8], np.int64)),
    )
    narrow = b.op("ReduceMax", wide, b.initializer("ax", np.array([1], np.int64)), keepdims=0)
    b.output(b.op("Sigmoid", b.op("Neg", b.op("Exp", narrow))))
    return b


def test_views_and_groups_share_buffers_across_dims_changes(runtime: Runtime) -> None:
    compiled = CompilerPipeline(core_operator_registry()).compile(_graph().graph)
    assert compiled.buffer_groups and len(compiled.aliases) == 3
    executor = runtime.load_model(compiled)
    pool = executor._pool
    relu, flat = (BufferRef(tensor=compiled.tensor_by_name(n).id) for n in ("Relu_out0", "Flatten_out0"))
    rng = np.random.default_rng(3)
    for n in (4, 3000, 2, 700):
        x = rng.standard_normal(n).astype(np.float32)
        got = executor.run({"x": x})[compiled.tensors[compiled.outputs[0]].name]
        expected = 1 / (1 + np.exp(np.exp(np.maximum(x, 0))))  # Sigmoid(-Exp(Relu(x)))
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        assert pool.get(flat) is pool.get(relu)  # Flatten -> Unsqueeze -> Relu: one buffer
        sizes = buffer_sizes(compiled, executor.dims)
        owners = compiled.storage_owners()
        for group in compiled.buffer_groups:
            members = [ref for ref in sizes if owners.get(ref, ref) == group[0]]
            assert pool.get(group[0]).size >= max(sizes[ref] for ref in members)
            assert len({id(pool.get(ref)) for ref in members}) == 1
