"""`PlanExecutor`: one compiled plan on one device, re-targetable to new dims without recompiling.

Load creates every shader module and pipeline (so a WGSL error surfaces at load, naming the node)
and uploads weights. A dims change, explicit or bound from input shapes in `run()`, re-evaluates
the expressions that depend on the dims that moved (`IncrementalLayout`; everything on the first
run or when a buffer must grow) and commits them: buffers grow, affected bind groups are rebuilt,
and the moved commands are patched in the program; shader modules and pipelines never are
(`stats` proves it). Each
`run()` is one command buffer: queued input writes, the program, and the output copies into a
single staging buffer that is mapped once.

Readback goes through `_readback`, a list of (buffer, staging offset, size); keeping outputs on
the GPU (for an LLM's KV cache) would mean leaving a tensor out of that list and handing out its
buffer instead, without touching the program.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping

import numpy as np
import wgpu

from onyxia.core.dtypes import DataType
from onyxia.core.errors import DeviceError, InputError, OnyxiaError
from onyxia.core.plan import BufferRef, CompiledModel, Dispatch, TensorRole, WriteBuffer
from onyxia.runtime.buffers import BufferPool
from onyxia.runtime.convert import from_gpu, padded_nbytes, storage_bytes, to_gpu
from onyxia.runtime.device import DeviceContext, ExecutorStats, wgpu_boundary
from onyxia.runtime.incremental import Delta, IncrementalLayout
from onyxia.runtime.inputs import InputBinder
from onyxia.runtime.layout import (
    DimsLayout,
    DispatchValues,
    buffer_sizes,
    evaluate_layout,
    flatten_steps,
    referenced_symbols,
)
from onyxia.runtime.native_encode import Encoder, native_encoder
from onyxia.runtime.pipelines import PipelineCache
from onyxia.runtime.profiling import DispatchTime, DispatchTimer, RunProfile, encode_timed
from onyxia.runtime.program import (
    DispatchState,
    Program,
    build_program,
    commit_dispatch,
    encode,
    patch_program,
    prepare_dispatch,
)
from onyxia.runtime.upload import upload_weights

__all__ = ["PlanExecutor"]

log = logging.getLogger(__name__)

_FALLBACK_FEATURES = frozenset({"immediates"})  # the uniform rewrite stands in for these


class PlanExecutor:
    """Runs `compiled` with `run()`; created by `Runtime.load_model`."""

    def __init__(
        self,
        ctx: DeviceContext,
        compiled: CompiledModel,
        dims: Mapping[str, int] | None = None,
        max_dims: Mapping[str, int] | None = None,
    ) -> None:
        self.ctx = ctx
        self.compiled = compiled
        self.stats = ExecutorStats()
        self._check_features()
        self._names = _buffer_names(compiled)
        self._flat = flatten_steps(compiled)
        self._symbols = referenced_symbols(compiled, self._flat)
        self._inputs = InputBinder(compiled)
        self._pool = BufferPool(ctx, self.stats, self._names)
        self._pool.aliases = compiled.storage_owners()  # views, in-place state and buffer groups
        self._carries: list[tuple[BufferRef, BufferRef]] = []
        pipelines = PipelineCache(ctx, compiled.shaders, self.stats)
        self._states: list[DispatchState | None] = [
            prepare_dispatch(fs, pipelines, self._pool, ctx, self.stats) if isinstance(fs.step, Dispatch) else None
            for fs in self._flat
        ]
        upload_weights(compiled, self._pool)
        self._incremental = IncrementalLayout(compiled, self._flat, ctx)
        self._encode: Encoder = native_encoder(ctx.device) or encode
        self._dims: dict[str, int] = {**compiled.dims, **_checked_dims(dims or {})}
        self._layout: DimsLayout | None = None
        self._program = Program()
        self._writes: list[tuple[wgpu.GPUBuffer, int, np.ndarray]] = []
        self._readback: list[tuple[str, wgpu.GPUBuffer, int, int]] = []
        self._carry_copies: list[tuple[wgpu.GPUBuffer, wgpu.GPUBuffer, int]] = []
        self._outputs: list[tuple[str, DataType, int, tuple[int, ...]]] = []
        self._output_specs = [
            (tid, compiled.tensors[tid].name, compiled.tensors[tid].dtype, BufferRef(tensor=tid))
            for tid in compiled.outputs
        ]  # looked up once: the readback plan is redone at every dims change
        self._staging_bytes = 0
        if max_dims:
            self._preallocate(_checked_dims(max_dims))
        if self._symbols <= self._dims.keys():
            self._apply(self._dims)

    # ----- public API ------------------------------------------------------------------------
    @property
    def dims(self) -> dict[str, int]:
        """The dims the executor is currently set up for (a copy)."""
        return dict(self._dims)

    @property
    def gpu_bytes(self) -> int:
        """Bytes of every GPU buffer this executor holds (storage and staging; a buffer shared by
        several refs counts once)."""
        buffers = {id(b): b for b in self._pool.buffers.values()}
        if self._pool.staging is not None:
            buffers[id(self._pool.staging)] = self._pool.staging
        return sum(int(b.size) for b in buffers.values())

    def buffer_bytes(self, name: str) -> int:
        """Bytes of the GPU buffer that serves tensor `name` (shared with its aliases and group)."""
        return int(self._pool.get(self._ref(name)).size)

    @property
    def weight_bytes(self) -> int:
        """GPU bytes of the plan's weights and constants, as uploaded (their sizes are static)."""
        total = 0
        for t in self.compiled.tensors.values():
            if t.data is not None and t.role is not TensorRole.SYMBOLIC and isinstance(t.nbytes, int):
                total += t.nbytes
        return total

    @property
    def input_names(self) -> list[str]:
        return list(self._inputs.names)

    @property
    def output_names(self) -> list[str]:
        return [self.compiled.tensors[t].name for t in self.compiled.outputs]

    def keep_resident(self, names: Collection[str]) -> None:
        """Keep these inputs on the GPU between runs: `run()` no longer requires them, and their
        buffers keep their contents (also when they grow). The LLM session keeps its KV cache so."""
        unknown = sorted(set(names) - set(self._inputs.names))
        if unknown:
            raise InputError(f"keep_resident(): {unknown} are not inputs; the inputs are {self._inputs.names}")
        self._inputs.resident |= set(names)
        self._pool.preserved |= {self._ref(name) for name in names}

    def carry(self, pairs: Mapping[str, str]) -> None:
        """After each run, copy output `pairs[input]` into resident `input` on the GPU (no host trip).

        Pairs the plan aliases (one buffer, updated in place) need no copy and are skipped."""
        self.keep_resident(list(pairs))
        outputs = set(self.output_names)
        for dst, src in pairs.items():
            if src not in outputs:
                raise InputError(f"carry(): '{src}' is not an output; the outputs are {sorted(outputs)}")
            src_ref, dst_ref = self._ref(src), self._ref(dst)
            if self._pool.owner(src_ref) != self._pool.owner(dst_ref):
                self._carries.append((src_ref, dst_ref))
        if self._layout is not None:
            self._refresh_carries(self._layout)

    def _refresh_carries(self, layout: DimsLayout) -> None:
        self._carry_copies = [
            (self._pool.get(src), self._pool.get(dst), padded_nbytes(layout.buffer_bytes[src]))
            for src, dst in self._carries
            if layout.buffer_bytes[src]
        ]

    def write_input(self, name: str, array: np.ndarray) -> None:
        """Set a resident input's contents (e.g. a zeroed fixed-size cache) without running."""
        self.keep_resident([name])
        spec = next(s for s in self._inputs.specs if s.name == name)
        data = to_gpu(f"input '{name}'", spec.dtype, array, InputError)
        if self._pool.ensure(spec.ref, data.nbytes):
            self._layout = None  # bind groups name the old buffer: the next run commits in full
        self._pool.write(spec.ref, data)

    def run(self, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None = None) -> dict[str, np.ndarray]:
        """Outputs by name, in their logical dtypes and the current dims' shapes.

        `outputs` limits what is read back (the rest stays on the GPU); by default all are."""
        bound, uploads = self._inputs.bind(inputs, self._dims)
        changed = {k: v for k, v in bound.items() if self._dims.get(k) != v}
        if changed or self._layout is None:
            self.update_dimensions(changed)
        if self._layout is None:
            missing = sorted(self._symbols - self._dims.keys())
            raise InputError(
                f"run(): dims {missing} have no value (bound so far: {self._dims}); they appear in no input shape, "
                "so bind them with load_model(dims=...) or update_dimensions()"
            )
        for ref, array in uploads:
            self._pool.write(ref, array)
        for buffer, offset, data in self._writes:
            self.ctx.queue.write_buffer(buffer, offset, data)
        wanted = self._select_outputs(outputs)
        with wgpu_boundary(DeviceError, "run(): encoding or submitting the plan"):
            encoder = self.ctx.device.create_command_encoder()
            self._encode(encoder, self._program)
            for src, dst, size in self._carry_copies:
                encoder.copy_buffer_to_buffer(src, 0, dst, 0, size)
            for name, buffer, offset, size in self._readback:
                if name in wanted:
                    encoder.copy_buffer_to_buffer(buffer, 0, self._pool.staging, offset, size)
                    self.stats.bytes_read_back += size
            self.ctx.queue.submit([encoder.finish()])
        self.stats.runs += 1
        self.stats.dispatches_encoded = self._program.dispatches
        read = [entry for entry in self._readback if entry[0] in wanted]
        end = max((offset + size for _, _, offset, size in read), default=0)
        raw = self._pool.read_staging(end) if read else b""
        return {
            name: from_gpu(dtype, raw, offset, shape) for name, dtype, offset, shape in self._outputs if name in wanted
        }

    def _select_outputs(self, outputs: Collection[str] | None) -> set[str]:
        names = set(self.output_names)
        if outputs is None:
            return names
        unknown = sorted(set(outputs) - names)
        if unknown:
            raise InputError(f"run(outputs=...): {unknown} are not outputs; the outputs are {sorted(names)}")
        return set(outputs)

    def _ref(self, name: str) -> BufferRef:
        return BufferRef(tensor=self.compiled.tensor_by_name(name).id)

    def update_dimensions(self, dims: Mapping[str, int]) -> None:
        """Re-target the plan to `dims` (merged into the current ones); no shader or pipeline is rebuilt.

        While some dims are still unbound the values are only recorded; the first run binds the rest
        from its input shapes and evaluates everything then."""
        checked = _checked_dims(dims)
        known = self._symbols | self.compiled.dims.keys()
        unknown = sorted(set(checked) - known)
        if unknown:
            raise InputError(f"update_dimensions(): unknown dims {unknown}; the model's dims are {sorted(known)}")
        merged = {**self._dims, **checked}
        if self._symbols <= merged.keys():
            self._apply(merged)
        else:
            self._dims, self._layout = merged, None

    def profile_run(self, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None = None) -> RunProfile:
        """`run()` with GPU timestamps around each dispatch, plus the host time `run()` spends before submit.

        A separate path, so `run()` itself never pays for profiling; the device needs 'timestamp-query'
        (`Runtime(profiling=True)`). Same effects as `run()`; its outputs are in the profile."""
        started = time.perf_counter_ns()
        bound, uploads = self._inputs.bind(inputs, self._dims)
        changed = {k: v for k, v in bound.items() if self._dims.get(k) != v}
        if changed or self._layout is None:
            self.update_dimensions(changed)
        if self._layout is None:
            raise InputError(f"profile_run(): dims {sorted(self._symbols - self._dims.keys())} have no value")
        for ref, array in uploads:
            self._pool.write(ref, array)
        for buffer, offset, data in self._writes:
            self.ctx.queue.write_buffer(buffer, offset, data)
        wanted = self._select_outputs(outputs)
        prepared = time.perf_counter_ns()
        scratch = self.ctx.device.create_command_encoder()  # timed like run()'s encode, never submitted
        self._encode(scratch, self._program)
        scratch.finish()
        encoded = time.perf_counter_ns()
        labels = self._dispatch_labels(self._layout)
        timer = DispatchTimer(self.ctx, len(labels))
        with wgpu_boundary(DeviceError, "profile_run(): encoding or submitting the plan"):
            encoder = self.ctx.device.create_command_encoder()
            encode_timed(encoder, self._program, timer)
            for src, dst, size in self._carry_copies:
                encoder.copy_buffer_to_buffer(src, 0, dst, 0, size)
            read = [entry for entry in self._readback if entry[0] in wanted]
            for _, buffer, offset, size in read:
                encoder.copy_buffer_to_buffer(buffer, 0, self._pool.staging, offset, size)
            timer.resolve(encoder)
            self.ctx.queue.submit([encoder.finish()])
        raw = self._pool.read_staging(max(offset + size for _, _, offset, size in read)) if read else b""
        result = {name: from_gpu(dt, raw, off, shape) for name, dt, off, shape in self._outputs if name in wanted}
        times = [DispatchTime(node, op, ns) for (node, op), ns in zip(labels, timer.read())]
        return RunProfile(result, times, prepared - started, encoded - prepared)

    def _dispatch_labels(self, layout: DimsLayout) -> list[tuple[str, str]]:
        """(node, op type) of each dispatch the program encodes, in program order."""
        op_types = {op.name: op.op_type for op in self.compiled.operations}
        labels = [
            (fs.node, op_types.get(fs.node, "?"))
            for fs, values in zip(self._flat, layout.steps)
            if isinstance(values, DispatchValues) and values.workgroups is not None
        ]
        if len(labels) != self._program.dispatches:
            raise DeviceError(
                f"profile_run(): {len(labels)} live dispatches, the program has {self._program.dispatches}"
            )
        return labels

    def release(self) -> None:
        """Destroy this executor's buffers now instead of waiting for garbage collection."""
        self._pool.release()
        self._layout = None

    # ----- dims changes ----------------------------------------------------------------------
    def _apply(self, dims: dict[str, int]) -> None:
        """Commit `dims`: incrementally from the current layout where it can, else in full."""
        if self._layout is not None:
            try:
                delta = self._incremental.update(self._layout, dims)
            except (OnyxiaError, ArithmeticError):
                delta = None  # the full path raises again, with the node and tensor named
            if delta is not None and self._commit_delta(delta, self._layout):
                self._dims = dims
                self.stats.dimension_updates += 1
                return
        self._apply_full(dims)

    def _commit_delta(self, delta: Delta, before: DimsLayout) -> bool:
        """Commit what `delta` moved from `before`; False when a buffer had to grow, since reallocation
        rebinds every dispatch bound to it: the full path does that."""
        layout, pool = delta.layout, self._pool
        self._layout = None  # a commit that fails half way must not leave a stale program in use
        if any(pool.ensure(ref, layout.buffer_bytes[ref]) for ref in delta.grown):
            return False
        for ref in delta.symbolic:
            pool.write(ref, layout.symbolic[ref])
        rebuild = False
        for index in delta.steps:
            state, values = self._states[index], layout.steps[index]
            if (
                state is not None
                and isinstance(values, DispatchValues)
                and _rebinds(state, values, before.steps[index])
            ):
                commit_dispatch(state, values, pool, self.ctx, self.stats)
            rebuild |= not patch_program(self._program, index, self._flat[index], state, values, pool)
        if rebuild:
            self._program = build_program(self._flat, self._states, layout, pool)
        if delta.buffers:
            self._refresh_carries(layout)
        self._plan_readback(layout)
        self._layout = layout
        return True

    def _apply_full(self, dims: dict[str, int]) -> None:
        layout = evaluate_layout(self.compiled, self._flat, dims, self.ctx, self._names)
        self._layout = None  # a commit that fails half way must not leave a stale program in use
        self._pool.ensure_all(layout.buffer_bytes)
        for ref, array in layout.symbolic.items():
            self._pool.write(ref, array)
        for state, values in zip(self._states, layout.steps):
            if state is not None and isinstance(values, DispatchValues):
                commit_dispatch(state, values, self._pool, self.ctx, self.stats)
        self._program = build_program(self._flat, self._states, layout, self._pool)
        self._refresh_carries(layout)
        self._writes = [
            (self._pool.get(fs.step.dst), fs.step.offset, storage_bytes(np.frombuffer(fs.step.data, np.uint8)))
            for fs in self._flat
            if isinstance(fs.step, WriteBuffer) and fs.step.data
        ]
        self._plan_readback(layout)
        self._dims, self._layout = dims, layout
        self.stats.dimension_updates += 1
        log.debug("dims set to %s: %d dispatches", dims, self._program.dispatches)

    def _plan_readback(self, layout: DimsLayout) -> None:
        """Staging offsets per output (8-byte aligned, as mapping reads need)."""
        self._readback, self._outputs, offset, copied = [], [], 0, {}
        for tid, name, dtype, ref in self._output_specs:
            nbytes = layout.buffer_bytes[ref]
            if tid not in copied and nbytes:
                copied[tid] = offset
                self._readback.append((name, self._pool.get(ref), offset, padded_nbytes(nbytes)))
                offset += _staged(nbytes)
            self._outputs.append((name, dtype, copied.get(tid, 0), layout.output_shapes[tid]))
        self._staging_bytes = offset
        if offset:
            self._pool.ensure_staging(offset)

    def _preallocate(self, max_dims: dict[str, int]) -> None:
        """Size every buffer (staging too) for the largest dims up front, so growth never reallocates."""
        sizes = buffer_sizes(self.compiled, {**self._dims, **max_dims})
        self._pool.ensure_all(sizes)
        outputs = {BufferRef(tensor=t) for t in self.compiled.outputs}
        self._pool.ensure_staging(sum(_staged(sizes[ref]) for ref in outputs))

    # ----- load ------------------------------------------------------------------------------
    def _check_features(self) -> None:
        missing = sorted(set(self.compiled.required_features) - self.ctx.features - _FALLBACK_FEATURES)
        if missing:
            raise DeviceError(
                f"the model requires adapter features {missing}, which the device lacks "
                f"(device features: {sorted(self.ctx.features)})"
            )


def _rebinds(state: DispatchState, values: DispatchValues, before: object) -> bool:
    """Whether `commit_dispatch` has work: ranges moved (no buffer was reallocated on this path), the
    dispatch comes back from 0 size, or its immediates live in a uniform buffer."""
    return state.uniform is not None or not isinstance(before, DispatchValues) or before.ranges != values.ranges


def _staged(nbytes: int) -> int:
    """Room a tensor takes in the staging buffer: mapped reads want 8-byte aligned offsets."""
    return (padded_nbytes(nbytes) + 7) // 8 * 8 if nbytes else 0


def _buffer_names(compiled: CompiledModel) -> dict[BufferRef, str]:
    names = {BufferRef(tensor=t.id): t.name for t in compiled.tensors.values()}
    names.update({BufferRef(scratch=s.id): s.label for op in compiled.operations for s in op.scratch})
    return names


def _checked_dims(dims: Mapping[str, int]) -> dict[str, int]:
    checked: dict[str, int] = {}
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise InputError(f"dim '{name}' = {value!r}; expected a non-negative integer")
        checked[name] = int(value)
    return checked
