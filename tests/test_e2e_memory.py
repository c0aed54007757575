"""Views and liveness-based buffer sharing, end to end: the attention block's outputs match
onnxruntime with and without them at several sequence lengths, the sharing plan takes less GPU
memory, and every shared buffer holds its largest member after each dims change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from models import attention_block
from oracle import assert_close, runtime

import onyxia.compiler
import onyxia.onnx
import onyxia.operators
from onyxia.core import BufferRef, CompiledModel
from onyxia.core.settings import override
from onyxia.operators.passes import BufferAliasingPass
from onyxia.runtime.layout import buffer_sizes

SEQUENCES = (9, 2, 16, 5)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "attention.onnx"
    onnx.save_model(attention_block(), path)
    return path


def _compile(path: Path, *, share: bool) -> CompiledModel:
    registry = onyxia.operators.core_operator_registry()
    if not share:
        registry.passes = [p for p in registry.passes if not isinstance(p, BufferAliasingPass)]
    with override(share_buffers=share):
        return onyxia.compiler.compile(onyxia.onnx.load_and_parse_model(path), registry, {"batch_size": 1})


def _check_group_sizes(executor: Any, model: CompiledModel) -> None:
    sizes = buffer_sizes(model, executor.dims)
    for group in model.buffer_groups:
        buffer = executor._pool.get(group[0])
        assert all(executor._pool.get(member) is buffer for member in group)
        largest = max(size for ref, size in sizes.items() if model.storage_owners().get(ref, ref) == group[0])
        assert buffer.size >= largest


def test_views_and_sharing_keep_outputs_and_save_memory(model_path: Path) -> None:
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    plain, shared = (_compile(model_path, share=s) for s in (False, True))
    assert shared.buffer_groups and len(shared.aliases) == 3 and not plain.buffer_groups and not plain.aliases
    executors = [runtime().load_model(m) for m in (plain, shared)]
    rng = np.random.default_rng(7)
    for seq in SEQUENCES:
        ids = rng.integers(0, 32, (1, seq)).astype(np.int64)
        expected = session.run(None, {"ids": ids})[0]
        for executor in executors:
            assert_close(executor.run({"ids": ids})["y"], expected, f"y (seq {seq})")
        _check_group_sizes(executors[1], shared)
    assert executors[1].gpu_bytes < executors[0].gpu_bytes


def test_owners_are_storage_roots(model_path: Path) -> None:
    model = _compile(model_path, share=True)
    owners = model.storage_owners()
    assert all(owner not in owners for owner in owners.values())  # one hop to the buffer, chains resolved
    assert all(BufferRef(tensor=o) in owners for o in model.aliases)
