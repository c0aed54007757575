"""`PlanExecutor`: one compiled plan on one device, re-targetable to new dims without recompiling.

Load creates every shader module and pipeline (so a WGSL error surfaces at load, naming the node)
and uploads weights. A dims change, explicit or bound from input shapes in `run()`, re-evaluates
the expressions that depend on the dims that moved (`IncrementalLayout`; everything on the first
run or when a buffer must grow) and commits them (`runtime/dims_commit.py`): buffers grow,
affected bind groups are rebuilt and the moved commands are patched in the program; shader
modules and pipelines never are (`stats` proves it). A dim the plan was compiled with
(`CompiledModel.dims`) is baked into it: moving one switches to the plan variant for the new
value (`runtime/variants.py`), compiling only the pipelines whose WGSL changed, or is refused
right there when the plan has no replanner. Each `run()` is one command buffer: the program,
carried state (`Carries`) and the output copies (`OutputReadback`) into one staging buffer mapped
once. The public methods are serialised by the executor (one lock): threads may share it, each
call sees the plan as the previous call left it."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping

import numpy as np
import wgpu

from onyxia.core.errors import InputError
from onyxia.core.plan import HOST_STEPS, BufferRef, CompiledModel, Dispatch
from onyxia.core.plan_values import UNSPECIALIZED
from onyxia.runtime.buffers import BufferPool, buffer_names
from onyxia.runtime.carries import Carries
from onyxia.runtime.commands import PUBLIC_CALLS, PassCalls, Program
from onyxia.runtime.control_flow import Subplans
from onyxia.runtime.convert import to_gpu
from onyxia.runtime.device import DeviceContext, ExecutorStats, check_features, serialized
from onyxia.runtime.dims_commit import apply_dims
from onyxia.runtime.incremental import IncrementalLayout
from onyxia.runtime.inputs import InputBinder, checked_dims
from onyxia.runtime.layout import BrokenAssumption, DimsLayout, buffer_sizes, flatten_steps, referenced_symbols
from onyxia.runtime.native_encode import native_calls
from onyxia.runtime.pending import PendingRun, submit_run
from onyxia.runtime.pipelines import PipelineCache
from onyxia.runtime.profiling import RunProfile, dispatch_labels, profile
from onyxia.runtime.program import DispatchState, prepare_dispatch
from onyxia.runtime.readback import OutputReadback
from onyxia.runtime.upload import upload_weights
from onyxia.runtime.variants import PlanVariants, adopt_buffers, build_pipelines, check_static_required

__all__ = ["PlanExecutor"]


class PlanExecutor:
    """Runs `compiled` with `run()`; created by `Runtime.load_model`."""

    compiled: CompiledModel  # the plan variant in use (`_load`)
    _inputs: InputBinder

    def __init__(
        self,
        ctx: DeviceContext,
        compiled: CompiledModel,
        dims: Mapping[str, int] | None = None,
        max_dims: Mapping[str, int] | None = None,
    ) -> None:
        self.ctx = ctx
        self.stats = ExecutorStats()
        self._lock = threading.RLock()  # run(), profile_run() and every state change, one at a time
        self._calls: PassCalls = native_calls(ctx.device) or PUBLIC_CALLS  # what `encode` talks to wgpu through
        self._pipelines = PipelineCache(ctx, compiled.shaders, self.stats)  # by WGSL source, across variants
        self._variants = PlanVariants(compiled)  # compiled dims that change switch plans (runtime/variants.py)
        self._max_dims = checked_dims(max_dims or {})
        self._carried: dict[str, str] = {}  # carry() pairs by name, registered again on a plan switch
        requested = checked_dims(dims or {})
        moved = self._variants.moved(requested)
        self._load(self._variants.plan_for(moved, self.stats, "load_model()") if moved else compiled, requested)

    def _load(self, compiled: CompiledModel, dims: Mapping[str, int], previous: BufferPool | None = None) -> None:
        """Set up everything that depends on the plan; `previous` (a plan switch) lends its buffers."""
        check_features(compiled.required_features, self.ctx)
        check_static_required(compiled, "load_model()" if previous is None else "a plan variant switch")
        before = self.compiled if previous is not None else compiled
        self.compiled, ctx = compiled, self.ctx
        self._variants.select(compiled)
        self._names = buffer_names(compiled)
        self._flat = flatten_steps(compiled)
        self._symbols = referenced_symbols(compiled, self._flat)
        resident = self._inputs.resident if previous is not None else set()
        self._inputs = InputBinder(compiled)
        self._pool = BufferPool(ctx, self.stats, self._names)
        self._pool.aliases = compiled.storage_owners()  # views, in-place state and buffer groups
        self._carries = Carries(self._pool)
        self._pipelines.shaders = compiled.shaders
        pipelines = self._pipelines
        self._states: list[DispatchState | None] = [
            prepare_dispatch(fs, pipelines, self._pool, ctx, self.stats) if isinstance(fs.step, Dispatch) else None
            for fs in self._flat
        ]
        kept, kept_bytes = adopt_buffers(self._pool, compiled, previous, before) if previous else (set(), 0)
        self.weight_bytes = kept_bytes + upload_weights(compiled, self._pool, skip=kept)  # a switch's kept ones too
        self._incremental = IncrementalLayout(compiled, self._flat, ctx)
        self._dims: dict[str, int] = {**compiled.dims, **{k: v for k, v in dims.items() if k not in compiled.dims}}
        self._layout: DimsLayout | None = None
        self._program = Program()
        self._writes: list[tuple[wgpu.GPUBuffer, int, np.ndarray]] = []
        self._readback = OutputReadback(compiled, self._pool)
        self._host_steps = any(isinstance(fs.step, HOST_STEPS) for fs in self._flat)
        self._unread: list[PendingRun | None] = [None, None]  # submitted runs not read yet, by staging slot
        self._last_slot = 0
        self._children = Subplans(lambda plan: PlanExecutor(self.ctx, plan), self.stats)  # If, Loop
        if resident or self._carried:  # before any growth, which keeps only registered state's contents
            self.keep_resident(resident & set(self._inputs.names))
            self.carry(self._carried)
        if self._max_dims:  # every buffer (staging too) sized for the largest dims up front: growth never reallocates
            sizes = buffer_sizes(compiled, {**self._dims, **self._max_dims})
            self._pool.ensure_all(sizes)
            self._readback.preallocate(sizes)
        if self._symbols <= self._dims.keys() and UNSPECIALIZED not in {self._dims[s] for s in self._symbols}:
            apply_dims(self, self._dims)  # (a compiled dim still UNSPECIALIZED waits for the first run's plan)

    # ----- public API ------------------------------------------------------------------------
    @property
    def dims(self) -> dict[str, int]:
        """The dims the executor is currently set up for (a copy)."""
        return dict(self._dims)

    @property
    def gpu_bytes(self) -> int:
        """Bytes of every GPU buffer this executor holds (storage and staging; a shared buffer counts once)."""
        return self._pool.total_bytes()

    def buffer_bytes(self, name: str) -> int:
        """Bytes of the GPU buffer that serves tensor `name` (shared with its aliases and group)."""
        return int(self._pool.get(self._ref(name)).size)

    @property
    def input_names(self) -> list[str]:
        return list(self._inputs.names)

    @property
    def output_names(self) -> list[str]:
        return list(self._readback.names)

    @serialized
    def keep_resident(self, names: Collection[str]) -> None:
        """Keep these inputs on the GPU between runs: `run()` no longer requires them, and their
        buffers keep their contents (also when they grow). The LLM session keeps its KV cache so."""
        unknown = sorted(set(names) - set(self._inputs.names))
        if unknown:
            raise InputError(f"keep_resident(): {unknown} are not inputs; the inputs are {self._inputs.names}")
        self._inputs.resident |= set(names)
        self._pool.preserved |= {self._ref(name) for name in names}

    @serialized
    def carry(self, pairs: Mapping[str, str]) -> None:
        """After each run, copy output `pairs[input]` into resident `input` on the GPU (no host trip).

        Pairs the plan aliases (one buffer, updated in place) need no copy and are skipped."""
        self.keep_resident(list(pairs))
        outputs = set(self.output_names)
        for dst, src in pairs.items():
            if src not in outputs:
                raise InputError(f"carry(): '{src}' is not an output; the outputs are {sorted(outputs)}")
            self._carries.add(self._ref(src), self._ref(dst))
        self._carried.update(pairs)
        if self._layout is not None:
            self._carries.plan(self._layout)

    @serialized
    def write_input(self, name: str, array: np.ndarray) -> None:
        """Set a resident input's contents (e.g. a zeroed fixed-size cache) without running."""
        self.keep_resident([name])
        spec = next(s for s in self._inputs.specs if s.name == name)
        data = to_gpu(f"input '{name}'", spec.dtype, array, InputError)
        if self._pool.ensure(spec.ref, data.nbytes):
            self._layout = None  # bind groups name the old buffer: the next run commits in full
        self._pool.write(spec.ref, data)

    @serialized
    def run(self, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None = None) -> dict[str, np.ndarray]:
        """Outputs by name, in their logical dtypes and the current dims' shapes.

        `outputs` limits what is read back (the rest stays on the GPU); by default all are."""
        return self._execute(self._prepare(inputs, outputs, "run()"))

    @serialized
    def submit(self, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None = None) -> PendingRun:
        """`run()` without waiting: the outputs come from `PendingRun.read()`, so the next run can be
        encoded and submitted while this one computes (runtime/pending.py)."""
        return submit_run(self, self._prepare(inputs, outputs, "submit()"))

    def _execute(self, wanted: set[str]) -> dict[str, np.ndarray]:
        return submit_run(self, wanted).read()

    @serialized
    def _read_slot(self, slot: int, run: PendingRun) -> dict[str, np.ndarray]:
        if self._unread[slot] is run:
            self._unread[slot] = None
        return self._readback.read(slot)

    def _prepare(
        self, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None, caller: str, fed: Collection[str] = ()
    ) -> set[str]:
        """Bind dims from the input shapes, queue the input writes (but `fed` ones: runtime/control_flow.py)."""
        moved = self._variants.moved_by_inputs(inputs)
        if moved:  # an input of a new shape along a compiled dim: the same switch as update_dimensions()
            self.update_dimensions(moved)
        moved = self._inputs.values.specialized(inputs)  # a value the plan is made for (compiler/deferred.py)
        if moved:
            self.update_dimensions(moved)
        bound, uploads = self._inputs.bind(inputs, self._dims, fed)
        changed = {k: v for k, v in bound.items() if self._dims.get(k) != v}
        if changed or self._layout is None:
            self.update_dimensions(changed)
        if self._layout is None:
            missing = sorted(self._symbols - self._dims.keys())
            raise InputError(
                f"{caller}: dims {missing} have no value (bound so far: {self._dims}); they appear in no input "
                "shape, so bind them with load_model(dims=...) or update_dimensions()"
            )
        for ref, array in uploads:
            self._pool.write(ref, array)
        for buffer, offset, data in self._writes:
            self.ctx.queue.write_buffer(buffer, offset, data)
        return self._readback.select(outputs)

    def _encode_tail(self, encoder: wgpu.GPUCommandEncoder, wanted: set[str], slot: int = 0) -> None:
        """What follows the program in a run's command buffer: carried state, then the output copies."""
        self._carries.encode(encoder)
        self.stats.bytes_copied = self._program.copy_bytes + sum(size for *_, size in self._carries.copies)
        self.stats.bytes_read_back += self._readback.encode(encoder, wanted, slot)

    def _ref(self, name: str) -> BufferRef:
        return BufferRef(tensor=self.compiled.tensor_by_name(name).id)

    @serialized
    def update_dimensions(self, dims: Mapping[str, int]) -> None:
        """Re-target the plan to `dims` (merged into the current ones); no shader or pipeline is rebuilt,
        except that a compiled dim switches to its plan variant (the pipelines of new WGSL only).

        While some dims are still unbound the values are only recorded; the first run binds the rest
        from its input shapes and evaluates everything then."""
        started = time.perf_counter_ns()
        try:
            self._update_dimensions(dims)
        finally:
            self.stats.dimension_update_ns += time.perf_counter_ns() - started

    def _update_dimensions(self, dims: Mapping[str, int]) -> None:
        checked = checked_dims(dims)
        known = self._symbols | self.compiled.dims.keys()
        unknown = sorted(set(checked) - known)
        if unknown:
            raise InputError(f"update_dimensions(): unknown dims {unknown}; the model's dims are {sorted(known)}")
        moved = self._variants.moved(checked)
        merged = {**self._dims, **checked}
        if moved:  # a compiled dim: switch to the plan variant for it (refused here if there is none)
            self._switch(self._variants.plan_for(moved, self.stats, "update_dimensions()", merged), merged)
            return
        if self._symbols <= merged.keys():
            try:
                apply_dims(self, merged)
            except BrokenAssumption as e:  # re-planned with its dims compiled where the plan allows (variants.py)
                self._switch(self._variants.for_broken(e, self.stats), merged)
        else:
            self._dims, self._layout = merged, None

    @serialized
    def live_dispatches(self) -> list[tuple[str, str]]:
        """(node, op type) of each dispatch a run under the current dims encodes, 0-size ones left out:
        what a decode step costs in dispatches, per node, without the timestamp feature profiling needs."""
        if self._layout is None:
            raise InputError("live_dispatches(): no dims are bound yet; run() or update_dimensions() first")
        return dispatch_labels(self.compiled, self._flat, self._layout, self._program.dispatches)

    @serialized
    def profile_run(self, inputs: Mapping[str, np.ndarray], outputs: Collection[str] | None = None) -> RunProfile:
        """`run()` with GPU timestamps around each dispatch, plus the host time `run()` spends before submit.

        A separate path, so `run()` itself never pays for profiling; the device needs 'timestamp-query'
        (`Runtime(profiling=True)`). Same effects as `run()`; its outputs are in the profile."""
        if self._host_steps:
            raise InputError(
                "profile_run(): the plan reads dims back or runs subplans mid-run (NonZero, If); use run()"
            )
        return profile(self, inputs, outputs)

    @serialized
    def release(self) -> None:
        """Destroy this executor's buffers now instead of waiting for garbage collection."""
        self._pool.release()
        self._layout = None

    # ----- dims changes ----------------------------------------------------------------------
    def _switch(self, compiled: CompiledModel, dims: dict[str, int]) -> None:
        """Load plan variant `compiled`: its pipelines are built first (a WGSL error leaves the
        executor as it was), runs still to be read are read, then the current buffers are lent to it."""
        build_pipelines(self._pipelines, compiled)
        for pending in self._unread:
            if pending is not None:
                pending.read()
        self._layout = None  # a load that fails half way must not leave a stale program in use
        self._load(compiled, dims, self._pool)
