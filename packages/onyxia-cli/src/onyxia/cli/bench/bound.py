"""The memory-bandwidth bound of one decode step: bytes it must read over the adapter's copy bandwidth.

Bandwidth is measured with a copy kernel run as a tiny `CompiledModel` through the runtime (the same
device, dispatch path and storage buffers models use): `copies` dispatches of `dst[i] = src[i]` over
vec4<f32>, timed from submit to completion, best of `repeats`. It counts bytes read plus bytes written.

Bytes per decode step come from the ONNX graph, so the bound is the model's and not an engine's: every
initializer is read whole, except those only Gathered (one row per token: the embedding lookup) or used
as RotaryEmbedding cos/sin caches (one row per position); a tied embedding that the LM head also reads
is read whole. KV: each attention node reads its past at the step's position (at most its window).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx
import wgpu
from onnx import helper

if TYPE_CHECKING:  # both are imported where used: the byte counts need neither the runtime nor the planner
    from onyxia.core import CompiledModel
    from onyxia.runtime import Runtime

__all__ = ["Bandwidth", "StepBytes", "copy_bandwidth", "decode_step_bytes"]

_COPY_WGSL = """// bench copy kernel. Bindings: 0 src (read), 1 dst (read_write), vec4<f32>. VEC4S: the vec4 count.
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if (i < VEC4Su) {
        dst[i] = src[i];
    }
}
"""
_ROW_READERS = {  # op -> inputs read by row
    ("", "Gather"): (0,),
    ("com.microsoft", "RotaryEmbedding"): (2, 3),
    ("com.microsoft", "GroupQueryAttention"): (7, 8),  # genai's cos/sin caches
    ("com.microsoft", "GatherBlockQuantized"): (0, 2),
}


@dataclass(frozen=True)
class Bandwidth:
    bytes_per_second: float  # read + written
    buffer_bytes: int
    copies: int
    seconds: float  # best repeat

    @property
    def gbps(self) -> float:
        return self.bytes_per_second / 1e9


@dataclass(frozen=True)
class StepBytes:
    weight_bytes: int
    kv_bytes: int
    position: int  # tokens in the cache before the step

    @property
    def total(self) -> int:
        return self.weight_bytes + self.kv_bytes

    def bound_seconds(self, bandwidth: Bandwidth) -> float:
        return self.total / bandwidth.bytes_per_second


def copy_bandwidth(runtime: Runtime, buffer_bytes: int = 64 << 20, copies: int = 8, repeats: int = 3) -> Bandwidth:
    """Copy `buffer_bytes` `copies` times per run; the first run is a warm-up (drivers compile then)."""
    limit = runtime.ctx.max_binding_size
    count = min(buffer_bytes, limit) // 16 * 4  # float32 elements, whole vec4s
    executor = runtime.load_model(_copy_plan(count, copies))
    # Reading a 4-byte buffer back waits for the copies (on_submitted_work_done_sync is broken in wgpu-py 0.32).
    fence = runtime.ctx.device.create_buffer(size=4, usage=wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST)
    best = float("inf")
    try:
        for _ in range(repeats + 1):
            started = time.perf_counter()
            executor.run({}, outputs=[])
            runtime.ctx.queue.read_buffer(fence)
            best = min(best, time.perf_counter() - started)
    finally:
        executor.release()
        fence.destroy()
    nbytes = 4 * count
    return Bandwidth(2 * nbytes * copies / best, nbytes, copies, best)


def _copy_plan(count: int, copies: int) -> CompiledModel:
    from onyxia.core import (
        BindingDesc,
        BufferRef,
        CompiledModel,
        CompiledShader,
        DataType,
        Dispatch,
        PlannedOp,
        PlanTensor,
        TensorRole,
    )

    src = PlanTensor(0, "bench/src", DataType.FLOAT, (count,), TensorRole.WEIGHT, np.ones(count, np.float32))
    dst = PlanTensor(1, "bench/dst", DataType.FLOAT, (count,), TensorRole.OUTPUT)
    bindings = [BindingDesc(0, BufferRef(tensor=0), True), BindingDesc(1, BufferRef(tensor=1), False)]
    workgroups = (count // 4 + 255) // 256
    operations = [
        PlannedOp(f"bench/copy_{i}", "Copy", [Dispatch(0, bindings, (workgroups, 1, 1))]) for i in range(copies)
    ]
    shader = CompiledShader("bench/copy", _COPY_WGSL.replace("VEC4S", str(count // 4)))
    return CompiledModel(operations, [shader], {0: src, 1: dst}, [], [1], [])


def decode_step_bytes(model_path: str | Path, position: int, head_dim: int | None = None) -> StepBytes:
    """What one decode step with `position` cached tokens reads: weights, then the KV cache (`head_dim`
    where the graph names the cache's last dim, as genai graphs do)."""
    model = onnx.load(str(model_path), load_external_data=False)
    graph = model.graph
    readers: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    for node in graph.node:
        for index, name in enumerate(node.input):
            readers[name].append((node.domain or "", node.op_type, index))
    weights = 0
    for tensor in graph.initializer:
        nbytes = int(np.prod(tensor.dims, dtype=np.int64)) * _itemsize(tensor.data_type)
        uses = readers.get(tensor.name, [])
        by_row = uses and all(index in _ROW_READERS.get((d, op), ()) for d, op, index in uses)
        weights += nbytes // max(1, tensor.dims[0]) if by_row and tensor.dims else nbytes
    return StepBytes(weights, _kv_bytes(graph, position, head_dim), position)


def _kv_bytes(graph: onnx.GraphProto, position: int, head_dim: int | None = None) -> int:
    """Past key/value bytes read at `position`; a GroupQueryAttention window caps what its layer reads."""
    windows: dict[str, int] = {}
    for node in graph.node:
        if node.op_type == "GroupQueryAttention":
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            for name in node.input[3:5]:
                windows[name] = int(attrs.get("local_window_size", -1))
    total = 0
    for value in graph.input:
        if not value.name.startswith("past_key_values"):
            continue
        dims = value.type.tensor_type.shape.dim
        per_position = 1
        for i, dim in enumerate(dims):
            if i not in (0, 2):  # batch 1; the past length is counted below
                named = head_dim if i == 3 and head_dim else 1
                per_position *= dim.dim_value if dim.HasField("dim_value") else named
        window = windows.get(value.name, -1)
        attended = position + 1 if window <= 0 else min(position + 1, window)
        total += per_position * attended * _itemsize(value.type.tensor_type.elem_type)
    return total


def _itemsize(data_type: int) -> int:
    return int(helper.tensor_dtype_to_np_dtype(data_type).itemsize)
