"""Real-size weights over the 128 MiB storage-binding limit: Gemma 3 270m's f32 tied embedding
(262144 x 640 = 671 MB) gathered for one token and used as the lm head for one position, on the
real limit, against numpy. About 10 s and 2 GB of RAM on lavapipe (2 cores)."""

from __future__ import annotations

from typing import Any

import numpy as np

from onyxia.compiler import CompilerPipeline
from onyxia.core import MAX_BINDING_BYTES, DataType, Dispatch, GraphBuilder, binding_limit
from onyxia.operators import core_operator_registry

VOCAB, HIDDEN = 262144, 640


def test_tied_embedding_over_the_binding_limit(runtime: Any) -> None:
    embed = np.random.default_rng(0).random((VOCAB, HIDDEN), dtype=np.float32) - np.float32(0.5)
    b = GraphBuilder("tied_lm_head")
    ids = b.input("input_ids", DataType.INT64, [1, 1])
    table = b.initializer("embed_tokens", embed)
    hidden = b.op("Gather", table, ids)
    b.output(b.op("MatMul", hidden, b.op("Transpose", table, perm=[1, 0])))
    with binding_limit(MAX_BINDING_BYTES):
        plan = CompilerPipeline(core_operator_registry()).compile(b.graph)
    assert [(op.op_type, len(op.steps)) for op in plan.operations] == [("Gather", 6), ("MatMulTransB", 6)]
    table_id = plan.tensor_by_name("embed_tokens").id
    ranges = [
        (bd.offset, bd.size)
        for op in plan.operations
        for step in op.steps
        if isinstance(step, Dispatch)
        for bd in step.bindings
        if bd.buffer.tensor == table_id
    ]
    assert len(ranges) == 12 and all(size <= MAX_BINDING_BYTES and offset % 256 == 0 for offset, size in ranges)

    executor = runtime.load_model(plan)
    for token in (0, 200_000, VOCAB - 1):
        logits = next(iter(executor.run({"input_ids": np.array([[token]], np.int64)}).values()))
        expected = embed @ embed[token]
        assert logits.shape == (1, 1, VOCAB)
        np.testing.assert_allclose(logits.reshape(-1), expected, rtol=1e-4, atol=1e-4)
