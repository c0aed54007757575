"""The harness of test_gqa_resident: a GroupQueryAttention node compiled against the LLM session's resident KV
layout (as the session sets it up: `graph.resident_kv`, present aliased to past, the private attribute
past_present_share_buffer = 1), and its oracle: onnxruntime run per batch row on ordinary, non-shared
caches cut from a host mirror of the whole slot buffer, whose rows the step then updates from onnxruntime's
present. After each step the GPU buffer must equal the mirror in every slot and row: new rows within
tolerance, every other byte exactly (nothing but the new rows is written)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper
from oracle import TOLERANCE, assert_close, make_model, reference_outputs, runtime

from onyxia.compiler import CompilerPipeline
from onyxia.core import BufferRef
from onyxia.core.resident_kv import KV_ROWS, ResidentKvLayout
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry
from onyxia.operators.attention.gqa_resident import SHARE_BUFFER

__all__ = ["PAST", "Cache", "Config", "compile_resident", "read_cache"]

PAST = ("past_key", "past_value")
RNG = np.random.default_rng(26)


@dataclass(frozen=True)
class Config:
    heads: int = 4
    kv: int = 2
    size: int = 16
    capacity: int = 24
    dtype: type = np.float32
    packed: bool = False
    attrs: dict[str, Any] = field(default_factory=dict)  # GroupQueryAttention attributes beyond the heads

    @property
    def rotary(self) -> bool:
        return bool(self.attrs.get("do_rotary"))

    def node_attrs(self) -> dict[str, Any]:
        return {"num_heads": self.heads, "kv_num_heads": self.kv, **self.attrs}

    def rand(self, *shape: int) -> np.ndarray:
        return np.asarray(RNG.standard_normal(shape), self.dtype)


def _model(cfg: Config, feeds: dict[str, np.ndarray | None], dims: dict, attrs: dict) -> onnx.ModelProto:
    inits = ["cos_cache", "sin_cache"] if cfg.rotary else []
    return make_model(
        "GroupQueryAttention",
        feeds,
        attrs,
        domain="com.microsoft",
        num_outputs=3,
        dim_params=dims,
        initializers=inits,
    )


def _rotary(cfg: Config) -> dict[str, np.ndarray | None]:
    angles = np.random.default_rng(7).random((64, cfg.size // 2)) * 6
    if not cfg.rotary:
        return {"cos_cache": None, "sin_cache": None}
    return {"cos_cache": np.asarray(np.cos(angles), cfg.dtype), "sin_cache": np.asarray(np.sin(angles), cfg.dtype)}


def _new(cfg: Config, batch: int, seq: int) -> dict[str, np.ndarray | None]:
    """One step's projections: q, k, v, or the packed QKV with key and value empty."""
    if cfg.packed:
        return {"query": cfg.rand(batch, seq, (cfg.heads + 2 * cfg.kv) * cfg.size), "key": None, "value": None}
    kv = cfg.kv * cfg.size
    return {
        "query": cfg.rand(batch, seq, cfg.heads * cfg.size),
        "key": cfg.rand(batch, seq, kv),
        "value": cfg.rand(batch, seq, kv),
    }


def compile_resident(cfg: Config, *, attribute: bool = True, layout: bool = True) -> Any:
    """The resident node's plan; `attribute` / `layout` False leave out the session's attribute or layout."""
    feeds = _new(cfg, 1, 1)
    feeds |= {name: cfg.rand(1, cfg.kv, cfg.capacity, cfg.size) for name in PAST}
    feeds |= {"seqlens_k": np.zeros(1, np.int32), "total_sequence_length": np.asarray(1, np.int32), **_rotary(cfg)}
    width = {name: array.shape[2] for name in ("query", "key", "value") if (array := feeds[name]) is not None}
    dims: dict[str, list[int | str]] = {name: ["batch", "seq", w] for name, w in width.items()}
    dims |= {name: ["batch", cfg.kv, cfg.capacity, cfg.size] for name in PAST}
    dims["seqlens_k"] = ["batch"]
    model = _model(cfg, feeds, dims, cfg.node_attrs())
    model.graph.input.append(helper.make_tensor_value_info(KV_ROWS, TensorProto.INT32, ["batch", 2]))
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save_model(model, Path(tmp, "model.onnx"))
        graph = load_and_parse_model(Path(tmp, "model.onnx"))
    ids = {t.name: t.id for t in graph.tensors}
    if attribute:  # private (not in the contrib schema): the session sets it on the parsed node
        (node,) = graph.nodes_of("GroupQueryAttention", "com.microsoft")
        node.attributes[SHARE_BUFFER] = 1
    past = [ids[name] for name in PAST]
    for present, past_id in zip(("y1", "y2"), past):
        graph.aliases[ids[present]] = past_id
    if layout:
        graph.resident_kv = ResidentKvLayout(cfg.capacity, ids[KV_ROWS], frozenset(past))
    return CompilerPipeline(core_operator_registry()).compile(graph)


def read_cache(executor: Any, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The whole resident buffer of input `name` (every slot), as the GPU holds it."""
    buffer = executor._pool.get(BufferRef(tensor=executor.compiled.tensor_by_name(name).id))
    raw = executor.ctx.queue.read_buffer(buffer)
    count = int(np.prod(shape))
    return np.frombuffer(raw, dtype, count).reshape(shape).astype(dtype)


class Cache:
    """One resident executor with its slot buffer and the host mirror onnxruntime keeps in step."""

    def __init__(self, cfg: Config, slots: int) -> None:
        self.cfg = cfg
        self.executor = runtime().load_model(compile_resident(cfg))
        self.gpu_dtype = np.dtype(self.executor.compiled.tensor_by_name(PAST[0]).dtype.gpu_numpy)
        shape = (slots, cfg.kv, cfg.capacity, cfg.size)
        self.mirror = {name: cfg.rand(*shape) for name in PAST}  # stale rows: what hides them must be seqlens_k
        for name, data in self.mirror.items():
            self.executor.write_input(name, data)

    def step(self, rows: list[tuple[int, int]], seq: int) -> list[tuple[str, str]]:
        """Append `seq` tokens to each (slot, cached length) row in one run; checks the output and the
        whole buffer against onnxruntime. Returns the run's live dispatches."""
        cfg, batch = self.cfg, len(rows)
        new = _new(cfg, batch, seq)
        seqlens = np.asarray([length + seq - 1 for _, length in rows], np.int32)
        total = np.asarray(max(seqlens) + 1, np.int32)
        feeds = {k: v for k, v in new.items() if v is not None}
        feeds |= {"seqlens_k": seqlens, "total_sequence_length": total, KV_ROWS: np.asarray(rows, np.int32)}
        self.executor.update_dimensions({"batch": batch, "seq": seq})
        dispatches = self.executor.live_dispatches()
        got = self.executor.run(feeds, outputs=["y0"])["y0"]
        expected = [self._reference(new, b, slot, length, seq) for b, (slot, length) in enumerate(rows)]
        assert_close(got, np.concatenate(expected), f"output of rows {rows}, {seq} new tokens")
        self._check_buffers(rows, seq)
        return dispatches

    def _reference(self, new: dict, b: int, slot: int, length: int, seq: int) -> np.ndarray:
        """onnxruntime on batch row b alone, its past cut from the mirror; the mirror takes its present."""
        cfg = self.cfg
        feeds = {k: None if v is None else v[b : b + 1] for k, v in new.items()}
        feeds |= {name: self.mirror[name][slot : slot + 1, :, :length] for name in PAST}
        feeds |= {"seqlens_k": np.asarray([length + seq - 1], np.int32)}
        feeds |= {"total_sequence_length": np.asarray(length + seq, np.int32), **_rotary(cfg)}
        model = _model(cfg, feeds, {}, cfg.node_attrs())
        given = {k: v for k, v in feeds.items() if v is not None and k not in ("cos_cache", "sin_cache")}
        output, *present = reference_outputs(model, given, "ort")  # cos/sin are the model's initializers
        for name, rows in zip(PAST, present):
            self.mirror[name][slot, :, : length + seq] = rows[0]
        return output

    def _check_buffers(self, rows: list[tuple[int, int]], seq: int) -> None:
        new = np.zeros(self.mirror[PAST[0]].shape, bool)
        for slot, length in rows:
            new[slot, :, length : length + seq] = True
        for name, expected in self.mirror.items():
            got = read_cache(self.executor, name, expected.shape, self.gpu_dtype).astype(expected.dtype)
            assert np.array_equal(got[~new], expected[~new]), f"{name}: a row that is not new changed"
            rtol, atol = TOLERANCE[np.dtype(expected.dtype)]
            assert_close(got[new], expected[new], f"{name}: the new rows", tolerance=(rtol, atol))
            expected[new] = got[new]  # the next steps' exact check is against what the GPU holds
