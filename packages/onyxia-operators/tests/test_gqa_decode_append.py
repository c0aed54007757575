"""GroupQueryAttention over an in-place cache: a one-token step is one dispatch (the KV append runs inside
the decode kernel, gqa_decode_append.wgsl), a prompt keeps its two; the outputs and the cache after every
step equal onnxruntime's run step by step on explicit past tensors (rotary, a sliding window, f32 and f16;
packed QKV in place is covered by test_gqa_packed)."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close, reference_outputs, runtime
from test_gqa_in_place import PAST, _compile_aliased, _feeds, _model


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_a_decode_step_is_one_dispatch(dtype: type) -> None:
    model = _model(dtype)
    executor = runtime().load_model(_compile_aliased(model))
    executor.keep_resident(list(PAST))
    theirs: dict[str, np.ndarray] = {}
    total = 0
    for seq in (5, 1, 1, 2, 1, 1, 1):  # the window (6) slides past the prompt during the decodes
        total += seq
        feeds = _feeds(seq, total, dtype) | theirs
        expected = reference_outputs(model, feeds, "ort")
        executor.update_dimensions({"past": total - seq, "seq": seq})
        assert len(executor.live_dispatches()) == (1 if seq == 1 else 2), executor.live_dispatches()
        got = executor.run({k: v for k, v in feeds.items() if k not in PAST})
        for name, e in zip(("y0", "y1", "y2"), expected):
            assert_close(got[name], e, f"{name} after {total} tokens")
        theirs = {"past_key": expected[1], "past_value": expected[2]}
